"""What every export shares: the plan's batch geometry and its framework equivalents."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.plan import Plan

STAGE_STRATEGY: dict[int, str] = {0: "ddp", 1: "zero1", 2: "zero2", 3: "zero3"}
"""The strategy an imported ZeRO stage means (the inverse of ``StrategyRule.zero_stage``
on DDP and DeepSpeed)."""


@dataclass(frozen=True, slots=True)
class Export:
    """An exported config: its text, a suggested file name, and what it could not say."""

    format: str
    filename: str
    text: str
    notes: tuple[str, ...] = field(default=())


def replicas(plan: Plan) -> int:
    """Data-parallel replicas that each draw micro-batches: DP (EP folds into them)."""
    return plan.parallelism.dp


def global_batch(plan: Plan) -> int:
    b = plan.batch
    return b.global_batch or b.micro_batch * b.grad_accum * replicas(plan)


def mixed_precision(plan: Plan) -> str:
    """'bf16', 'fp16' or 'no' — the compute dtype the frameworks call mixed precision."""
    c = plan.method.precision.compute_dtype
    return "no" if c == "fp32" else c
