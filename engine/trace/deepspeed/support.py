"""Which plans trace with DeepSpeed's own engine, and which it cannot run here.

DeepSpeed's engine re-views parameters into flat buffers (``param.data = …``) and
converts them to ZeRO-3 parameters in ways fake tensors refuse
(``docs/trace-frameworks.md``), so a ``deepspeed`` plan is traced on **real** CPU tensors
with a fake process group: the plan itself, materialised. That bounds the plans it takes
(:data:`MAX_TENSOR_BYTES`, :data:`MAX_TOKENS`, the buckets) — the machine is shared and a
2-core CPU runs the step. Decided from the plan alone (no torch), so the CLI and the GUI
refuse with one sentence before importing anything.
"""

from __future__ import annotations

import importlib.util

from engine.models.inventory import build_inventory, total_params
from engine.plan import Plan
from engine.stacks.defaults import resolve_stack_defaults, resolved

DS_VERSION = "0.19.8"
"""The DeepSpeed release whose engine the trace runs (pyproject's ``trace`` extra)."""

STAGES: dict[str, int] = {"zero1": 1, "zero2": 2, "zero3": 3}
"""Plan strategy → ``zero_optimization.stage``."""

MAX_TENSOR_BYTES = 1_200_000_000
"""At most this many bytes of tensors (:func:`tensor_bytes`), so the process stays under
2 GB of RAM on a shared machine: torch, transformers and DeepSpeed take about 0.55 GB
before any tensor (measured: the grid's h1024-L4-v32k plan, 112M parameters at dp 8,
peaked at 1.33 GB RSS for 0.91 GB by this formula)."""
MAX_TOKENS = 16_384
"""At most this many tokens per micro-batch (the fp32 logits of 32k vocab × 16k tokens
are 2 GiB already)."""
MAX_BUCKET_ELEMENTS = 100_000_000
"""DeepSpeed allocates the whole ``reduce_bucket_size`` (and ZeRO-3's prefetch buffers)
whatever the model's size; the code default 5e8 would be 1 GB of bf16 on this machine."""

FIX = "trace a narrower/shallower plan of the same stack"

MISSING = (
    "a deepspeed plan traces with DeepSpeed's own engine, which is not installed: "
    f"pip install 'memplan[trace]' (deepspeed=={DS_VERSION})"
)


def uses_deepspeed(plan: Plan) -> bool:
    """Whether the plan (``auto`` resolved) runs DeepSpeed's code: the ``deepspeed``
    stack, or a ZeRO strategy under another (the HF Trainer runs DeepSpeed's engine)."""
    return resolve_stack_defaults(plan).stack == "deepspeed" or plan.parallelism.strategy in STAGES


def tensor_bytes(plan: Plan) -> int:
    """Bytes of tensors the traced process holds at once, from the plan alone: per
    parameter 2 B of bf16 module plus 2 B for its flat copy while ``deepspeed.initialize``
    runs (ZeRO-3 materialises the whole model before partitioning it), 16 B ÷ dp for the
    fp32 master, both moments and the step's fp32 gradient; per token and vocabulary
    entry 14 B of logits (bf16, the fp32 upcast, the fp32 gradient of both)."""
    n = total_params(build_inventory(plan.model.architecture))
    tokens = plan.batch.micro_batch * plan.batch.seq_len
    return 4 * n + 16 * n // plan.parallelism.dp + 14 * tokens * plan.model.architecture.vocab


def _size_refusal(plan: Plan) -> str | None:
    need = tensor_bytes(plan)
    if need > MAX_TENSOR_BYTES:
        return (
            f"DeepSpeed is traced on real CPU tensors, so the plan must be small enough to "
            f"materialise: about {need:,} B of tensors here, at most {MAX_TENSOR_BYTES:,} B; "
            f"{FIX}"
        )
    tokens = plan.batch.micro_batch * plan.batch.seq_len
    if tokens > MAX_TOKENS:
        return (
            f"DeepSpeed is traced on real CPU tensors: at most {MAX_TOKENS:,} tokens per "
            f"micro-batch (this plan has {tokens:,}); {FIX}"
        )
    k = plan.parallelism.knobs
    big = max(k.ds_reduce_bucket_elements, k.ds_allgather_bucket_elements)
    if plan.parallelism.strategy == "zero3":
        big = max(big, k.ds_prefetch_bucket_elements)
    if big > MAX_BUCKET_ELEMENTS:
        return (
            f"DeepSpeed allocates its whole buckets on real CPU tensors: at most "
            f"{MAX_BUCKET_ELEMENTS:,} elements per bucket (this plan has {big:,}); set "
            "parallelism.knobs.ds_reduce_bucket_elements (and the all-gather / prefetch ones) "
            f"below the model's size, or {FIX}"
        )
    return None


def _layout_refusal(plan: Plan) -> str | None:
    par = plan.parallelism
    if par.strategy not in STAGES:
        return f"DeepSpeed's engine is traced with ZeRO-1, 2 or 3, not {par.strategy}"
    if par.tp > 1 or par.pp > 1 or par.cp > 1 or par.ep > 1 or par.expert_tp > 1:
        return "DeepSpeed with tensor, pipeline, context or expert parallelism is not traced"
    if plan.offload.optimizer != "none" or plan.offload.params != "none":
        return "DeepSpeed's CPU / NVMe offload is not traced: host memory is not tracked"
    if plan.batch.grad_accum > 1:
        return "DeepSpeed with gradient accumulation is not traced yet; trace batch.grad_accum 1"
    return None


def _method_refusal(plan: Plan) -> str | None:
    m = plan.method
    if m.kind != "full":
        return f"method {m.kind} is not traced with DeepSpeed (full training only)"
    if m.optimizer.name != "adamw":
        return f"the DeepSpeed trace runs AdamW; {m.optimizer.name} is not traced with it"
    prec = m.precision
    if prec.policy != "amp_master" or prec.compute_dtype != "bf16" or prec.loss_scaling:
        return (
            "the DeepSpeed trace runs bf16.enabled (bf16 module, fp32 master in the ZeRO "
            "optimizer): set precision policy amp_master with compute_dtype bf16"
        )
    if m.recompute.policy != "none":
        return "DeepSpeed with activation checkpointing is not traced yet; set recompute none"
    rt = plan.runtime
    if rt.attention != "sdpa_flash" or rt.loss != "standard" or rt.loss_impl != "eager":
        return (
            "the DeepSpeed trace runs transformers' model with SDPA and the standard eager "
            "loss: set runtime.attention sdpa_flash and runtime.loss_impl eager"
        )
    return None


def deepspeed_refusal(plan: Plan) -> str | None:
    """Why DeepSpeed's engine cannot be traced for this plan (one sentence), or None."""
    plan = resolved(plan)
    if plan.model.architecture.moe is not None or plan.model.architecture.mla is not None:
        return "DeepSpeed is traced for dense models (no MoE or MLA layers)"
    for check in (_layout_refusal, _method_refusal, _size_refusal):
        reason = check(plan)
        if reason is not None:
            return reason
    if importlib.util.find_spec("deepspeed") is None:
        return MISSING
    return None
