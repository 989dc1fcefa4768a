"""The Workload and Acceptance sections: how samples become micro-batches, how the
step is compiled, and what a measured run must meet to confirm the estimate.

Every default keeps the figures MemPlan printed before these inputs existed: samples
padded to ``batch.seq_len`` (or already filling it), eager mode, and a measured peak that
must fall inside the estimate's low–high range.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from engine.sections.base import Section

Packing = Literal["padded", "packed"]


class WorkloadSection(Section):
    """The training data's lengths, how they are batched, and the compiler.

    ``padded``: each sample is padded (or truncated) to ``batch.seq_len``, so every
    micro-batch is a ``micro_batch × seq_len`` tensor whatever the samples' lengths; the
    padding is computed and stored like real tokens. ``packed``: the micro-batch's
    samples are concatenated without padding (transformers ``DataCollatorWithFlattening``,
    TRL ``padding_free``, flash-attention's variable-length kernels), so its tensors hold
    only the real tokens — on average ``micro_batch × mean_sample_tokens``, and up to
    ``micro_batch × seq_len`` for a micro-batch of the longest samples.
    """

    packing: Packing = Field(
        default="padded",
        description="padded: every sample is padded to the sequence length; packed: "
        "samples are concatenated without padding (padding-free), so activations hold "
        "only real tokens.",
    )
    mean_sample_tokens: int | None = Field(
        default=None,
        ge=1,
        le=10_000_000,
        description="Mean length of one training sample (tokens); None = samples fill "
        "the sequence length. Sets the real tokens per step, and under packing the low "
        "end of the activations.",
    )
    torch_compile: bool = Field(
        default=False,
        description="The model runs under torch.compile: the saved activations' low end "
        "drops the fused RMSNorm / SwiGLU intermediates the partitioner recomputes; the "
        "high end stays eager (see the note the estimate shows).",
    )


class AcceptanceSection(Section):
    """What a measured run must meet to confirm the estimate (the validation plan).

    The report's validation plan prints these thresholds; a figure outside them refutes
    the estimate. The defaults are the strictest reading: the measured peak inside the
    estimate's own range, and a steady state that does not grow.
    """

    peak_tolerance_percent: float = Field(
        default=0.0,
        ge=0.0,
        le=100.0,
        description="A measured peak up to this share outside the estimate's low–high "
        "range still confirms it (%).",
    )
    warmup_steps: int = Field(
        default=2,
        ge=0,
        le=1000,
        description="Optimizer steps skipped before measuring (the first allocates the "
        "optimizer state) (count).",
    )
    measured_steps: int = Field(
        default=3, ge=1, le=1000, description="Steps measured after the warm-up (count)."
    )
    steady_window_steps: int = Field(
        default=6,
        ge=1,
        le=10000,
        description="The longer window whose peak must equal the measured one: a steady "
        "state (count).",
    )
    max_peak_growth_percent: float = Field(
        default=0.0,
        ge=0.0,
        le=100.0,
        description="How much the longer window's peak may exceed the measured one's "
        "before the run counts as leaking (%).",
    )
