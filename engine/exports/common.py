"""What every export shares: the plan's batch geometry and its framework equivalents."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.plan import Plan

ZERO_STAGE: dict[str, int] = {
    "ddp": 0,
    "fsdp1_no_shard": 0,
    "zero1": 1,
    "megatron_distopt": 1,
    "zero2": 2,
    "fsdp1_shard_grad_op": 2,
    "fsdp1_hybrid_shard_zero2": 2,
    "zero3": 3,
    "fsdp1_full_shard": 3,
    "fsdp1_hybrid_shard": 3,
    "fsdp2": 3,
    "fsdp2_hsdp": 3,
}
"""The ZeRO stage that shards the same states as each strategy (memory-model §2)."""

STAGE_STRATEGY: dict[int, str] = {0: "ddp", 1: "zero1", 2: "zero2", 3: "zero3"}


@dataclass(frozen=True, slots=True)
class Export:
    """An exported config: its text, a suggested file name, and what it could not say."""

    format: str
    filename: str
    text: str
    notes: tuple[str, ...] = field(default=())


def replicas(plan: Plan) -> int:
    """Data-parallel replicas that each draw micro-batches (DP × EP, as the engine counts)."""
    return plan.parallelism.dp * plan.parallelism.ep


def global_batch(plan: Plan) -> int:
    b = plan.batch
    return b.global_batch or b.micro_batch * b.grad_accum * replicas(plan)


def mixed_precision(plan: Plan) -> str:
    """'bf16', 'fp16' or 'no' — the compute dtype the frameworks call mixed precision."""
    c = plan.method.precision.compute_dtype
    return "no" if c == "fp32" else c
