"""Fit levers: changes an engineer would weigh before buying more GPUs — each shown as an
alternative with its cost in words, never applied to the plan.

For every lever the plan does not already pull (full activation recompute, optimizer
offload to host RAM, LoRA, QLoRA, a smaller micro-batch), the plan with that one change
is searched like the plan itself, so the answer reads "with full recompute: 256 GPUs
instead of 512 — ≈ +33 % compute". A lever the stack cannot run says why.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from engine.errors import PlanError
from engine.layout.counts import SEARCH_BUDGET_S, GpuCounts, gpu_counts
from engine.layout.point import Layout, target_global_batch
from engine.layout.shapes import every_layout_refused
from engine.legality.offload import offload_problems
from engine.plan import Plan, describe_validation_error, with_values


@dataclass(frozen=True, slots=True)
class Lever:
    """One change to the plan, what it costs, and the counts it would give."""

    name: str
    changes: tuple[tuple[str, Any], ...]
    cost: str
    counts: GpuCounts | None = None
    error: str | None = None  # the changed plan is not a valid plan: why
    refused: tuple[str, ...] = ()  # why the plan's stack runs no layout of the changed plan

    @property
    def gpus(self) -> int | None:
        """GPUs to procure with the lever pulled (None: nothing fits, or it cannot run)."""
        return self.counts.first_layout.gpus if self.counts else None

    @property
    def cannot_run(self) -> str | None:
        """Why the lever cannot run — the changed plan is invalid, or the stack refuses
        every layout of it (LoRA on Megatron-Core) — else None. Every view (CLI text and
        JSON, the window, the report) says this rather than "nothing fits"."""
        return self.error or ("; ".join(self.refused) if self.refused else None)


@dataclass(frozen=True, slots=True)
class LeverSummary:
    """What a view prints of a lever: its change, its cost, and the procurement count
    with the layout behind it (or why it cannot run).

    A :class:`Lever` carries its whole search result (a GpuCounts with every count's
    outcome), which the window's worker process would otherwise pickle across to the
    GUI thread after every settled edit (most of a megabyte for a large MoE model's
    levers); this is a few hundred bytes per lever, and the window and the report print
    from the same one."""

    name: str
    changes: tuple[tuple[str, Any], ...]
    cost: str
    gpus: int | None = None  # GPUs to procure with the lever pulled (None: none found)
    layout: Layout | None = None  # the procurement layout behind ``gpus``
    nodes: int | None = None
    arithmetic_min: int | None = None
    reason: str = ""  # why the procurement count is what it is
    error: str | None = None  # why the stack cannot run the lever (then no counts)

    @classmethod
    def of(cls, lever: Lever) -> LeverSummary:
        """The summary; a lever whose every layout the stack refuses (LoRA on
        Megatron-Core) cannot run, and says why rather than "nothing fits"."""
        c = lever.counts
        error = lever.cannot_run
        if c is None or error is not None:
            return cls(lever.name, lever.changes, lever.cost, error=error)
        first = c.first_layout
        return cls(
            lever.name,
            lever.changes,
            lever.cost,
            gpus=first.gpus,
            layout=first.layout,
            nodes=c.nodes,
            arithmetic_min=c.arithmetic_min.gpus,
            reason=first.reason,
        )


def _recompute(plan: Plan) -> tuple[str, dict[str, Any], str] | None:
    if plan.method.recompute.policy == "full":
        return None
    return (
        "full activation recompute",
        {"method.recompute.policy": "full"},
        "every layer's forward runs again in backward: ≈ +33 % compute per step "
        "(Korthikanti et al. 2022 §5)",
    )


_OFFLOADS: tuple[tuple[dict[str, Any], str], ...] = (
    ({"offload.optimizer": "cpu"}, "optimizer state"),
    ({"offload.optimizer": "cpu", "offload.params": "cpu"}, "parameters and optimizer state"),
)
"""Optimizer-only offload (ZeRO-Offload, Megatron), else everything (FSDP's CPU offload)."""


def _offload(plan: Plan) -> tuple[str, dict[str, Any], str] | None:
    off, strategy = plan.offload, plan.parallelism.strategy
    if off.optimizer != "none":
        return None
    for changes, moved in _OFFLOADS:
        if not offload_problems(strategy, changes.get("offload.params", off.params), "cpu"):
            return (
                "offload to host RAM",
                changes,
                f"{moved} in pinned host memory: every step waits on device↔host copies "
                f"over PCIe and a CPU optimizer, and host RAM per node grows",
            )
    return None


def _lora(plan: Plan) -> tuple[str, dict[str, Any], str] | None:
    if plan.method.kind != "full":
        return None
    return (
        "LoRA",
        {"method.kind": "lora"},
        "trains low-rank adapters instead of every weight — a different training method "
        "whose quality can differ; gradients and optimizer state only for the adapters",
    )


def _qlora(plan: Plan) -> tuple[str, dict[str, Any], str] | None:
    if plan.method.kind == "qlora":
        return None
    return (
        "QLoRA",
        {"method.kind": "qlora"},
        "a 4-bit frozen base dequantized at every matmul (slower steps) under LoRA "
        "adapters — a different training method whose quality can differ",
    )


def _micro_batch(plan: Plan) -> tuple[str, dict[str, Any], str] | None:
    b = plan.batch
    if b.micro_batch == 1:
        return None
    # the global batch is set to what the plan runs, so the search's layouts keep it
    # (raising grad_accum) instead of letting it follow DP: the cost below promises it
    target = target_global_batch(plan)
    changes: dict[str, Any] = {
        "batch.micro_batch": 1,
        "batch.grad_accum": target // plan.parallelism.dp,
        "batch.global_batch": target,
    }
    return (
        "micro-batch 1",
        changes,
        f"the same global batch ({target:,}) in {b.micro_batch}× more, smaller "
        f"micro-batches: lower GPU efficiency per step",
    )


LEVERS: tuple[Callable[[Plan], tuple[str, dict[str, Any], str] | None], ...] = (
    _recompute,
    _offload,
    _lora,
    _qlora,
    _micro_batch,
)
"""Each lever: the change it makes to a plan that does not pull it yet, or None."""


def fit_levers(
    plan: Plan, max_gpus: int | None = None, budget_s: float | None = SEARCH_BUDGET_S
) -> tuple[Lever, ...]:
    """Every lever the plan does not pull yet, with the GPU counts it would give (the
    counts only: no lever lists its own alternatives or rejected layouts)."""
    out: list[Lever] = []
    for lever in LEVERS:
        got = lever(plan)
        if got is None:
            continue
        name, changes, cost = got
        items = tuple(changes.items())
        try:
            variant = with_values(plan, changes)
            counts = gpu_counts(variant, max_gpus, budget_s=budget_s, alternatives=False)
            out.append(Lever(name, items, cost, counts, refused=every_layout_refused(variant)))
        except ValidationError as exc:
            out.append(Lever(name, items, cost, error="; ".join(describe_validation_error(exc))))
        except PlanError as exc:
            out.append(Lever(name, items, cost, error=str(exc)))
    return tuple(out)
