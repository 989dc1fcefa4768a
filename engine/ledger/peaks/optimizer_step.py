"""The optimizer step's temporaries on the GPU (``hbm.optimizer_step.*``), measured for
PyTorch's AdamW (torch 2.13): live only in the optimizer phase."""

from __future__ import annotations

from engine.ledger.held import HeldTensor
from engine.ledger.precision import DTYPE_BYTES
from engine.ledger.row import OPTIMIZER, Row, make_row
from engine.ledger.states.rows import shard_allocs
from engine.plan import Plan
from engine.stacks.families import StrategyRule
from engine.units import fmt_count, round_up


def optimizer_temp_rows(plan: Plan, held: list[HeldTensor], rule: StrategyRule) -> list[Row]:
    """The optimizer step's temporaries (none when it runs off the GPU, fused, or for
    optimizers without them)."""
    opt = plan.method.optimizer
    if (
        plan.offload.optimizer != "none"
        or plan.offload.params != "none"
        or opt.implementation == "fused"
        or opt.name in ("adam8bit", "sgd")
    ):
        return []
    trainable = [t for t in held if t.trainable]
    if not trainable:
        return []
    gran = plan.runtime.allocation_granularity_bytes
    allocs = shard_allocs(trainable, rule.optimizer, rule, "state_dtype")
    sized = [(round_up(a.numel * DTYPE_BYTES[a.dtype], gran), a.count) for a in allocs]
    dtypes = "/".join(sorted({a.dtype for a in allocs}))
    if opt.implementation == "foreach":
        n = sum(size * count for size, count in sized)
        formula = (
            f"foreach: one {dtypes} copy of every (sharded) parameter, "
            f"{sum(c for _, c in sized)} allocations = {fmt_count(n)} B"
        )
    else:
        # Tensor order within a layer repeats across layers, so one layer's sequence (plus
        # the previous layer's last tensor before its first) gives the same maximum.
        sizes = [size for size, count in sized for _ in range(min(count, 2))]
        n = max((2 * s + (sizes[i - 1] if i else 0) for i, s in enumerate(sizes)), default=0)

        formula = f"for-loop: max over tensors of 2·size(p_i) + size(p_(i−1)) = {fmt_count(n)} B"
    low = n if opt.name == "adamw" else 0
    return [
        make_row(
            id="hbm.optimizer_step.temporaries",
            label="Optimizer step temporaries",
            state="optimizer_step",
            location="hbm",
            kind="peak",
            group="temporaries",
            low=low,
            high=n,
            formula=formula + ("" if opt.name == "adamw" else " (measured for AdamW only: low 0)"),
            source="torch-adamw",
            phases=OPTIMIZER,
        )
    ]
