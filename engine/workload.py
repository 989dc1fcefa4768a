"""Tokens per optimizer step, and what the workload inputs change that the ledger cannot.

A padded micro-batch computes every position of ``micro_batch × seq_len`` whether a
sample fills it or not; a packed (padding-free) one computes only its samples' tokens.
So the step's *real* tokens — what the job trains on, what its throughput is quoted in —
differ from its token positions by the padding. :func:`step_tokens` gives both (the
micro-batches of every data-parallel replica, as the exporters count the global batch).

``torch.compile`` lowers the saved activations' low end (and the recomputed layer's) by
the fused RMSNorm / SwiGLU intermediates AOT Autograd's min-cut partitioner recomputes
instead of saving, and under torchtitan's per-op SAC by the cached outputs no backward
reads (:mod:`engine.ledger.activations.compiled`); the high end stays eager, and
``mode="reduce-overhead"`` CUDA-graph pools are not counted: :func:`compile_note` says so
wherever the estimate is shown.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.plan import Plan

COMPILE_SOURCE = "torch-compile-partitioner"


def replicas(plan: Plan) -> int:
    """Data-parallel replicas that each draw micro-batches: DP (EP folds into them)."""
    return plan.parallelism.dp


def global_batch(plan: Plan) -> int:
    """Samples per optimizer step: the plan's explicit global batch, else micro × GA × DP.
    Here (not with the exporters) so the window can ask for it without importing every
    framework format."""
    b = plan.batch
    return b.global_batch or b.micro_batch * b.grad_accum * replicas(plan)


@dataclass(frozen=True, slots=True)
class StepTokens:
    """One optimizer step's samples and tokens, over the whole job."""

    samples: int
    positions: int  # token positions computed (padding included)
    real: int  # real tokens trained on

    @property
    def padding_share(self) -> float:
        """Share of the computed positions that are padding."""
        return 1 - self.real / self.positions if self.positions else 0.0


def step_tokens(plan: Plan) -> StepTokens:
    """The step's samples, computed positions and real tokens (see the module doc)."""
    samples = global_batch(plan)
    seq = plan.batch.seq_len
    mean = min(plan.workload.mean_sample_tokens or seq, seq)
    real = samples * mean
    positions = real if plan.workload.packing == "packed" else samples * seq
    return StepTokens(samples, positions, real)


def compile_note(plan: Plan) -> str | None:
    """The note a view shows when the plan runs under torch.compile (None otherwise)."""
    if not plan.workload.torch_compile:
        return None
    return (
        "torch.compile is on: the saved activations' low end (and the recomputed layer's) "
        "drops the fused RMSNorm / SwiGLU intermediates AOT Autograd's min-cut partitioner "
        "recomputes and the per-op SAC outputs no backward reads, the high end "
        "stays eager (a range, not a promise: the cut depends on the graph); "
        "mode='reduce-overhead' CUDA-graph pools are not counted; measure the compiled "
        f"step before buying [{COMPILE_SOURCE}]."
    )
