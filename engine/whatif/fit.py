"""What fits a given layout: the largest micro-batch and the longest sequence.

``engine.analysis`` runs both for a plan; the window, ``memplan layouts --fit`` and the
report show them. Both searches treat ``estimate`` as a black box and assume the peak
never falls as the micro-batch or the sequence grows (activations and logits scale with
tokens). They gallop up from the smallest value and bisect, so they cost O(log n)
estimates. When the ledger does not grow with the input at all, the answer is the
search bound, and the result says so instead of inventing a limit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from engine.errors import PlanError
from engine.estimate import estimate
from engine.layout.point import keeps_global_batch, target_global_batch
from engine.layout.proofs.evaluate import Estimator
from engine.plan import Plan

MAX_MICRO_BATCH = 4096
"""Upper bound of the micro-batch search (sequences per rank)."""


@dataclass(frozen=True, slots=True)
class FitResult:
    """The largest value that fits (None if even the smallest does not), and why."""

    field: str
    value: int | None
    bound: int
    bounded: bool  # True: the search stopped at its bound, not at a limit
    reason: str
    searched: str = ""  # the values tried, in words (what the reason is relative to)
    unit: str = ""  # of the value ("tokens"; a micro-batch counts sequences per rank)

    @property
    def answer(self) -> str:
        """The value in a few words (the reason says why), as every front end prints it."""
        if self.value is None:
            return "none fits"
        return f"{self.value:,} {self.unit}".rstrip() + (
            " (the search bound)" if self.bounded else ""
        )


def _fits(plan: Plan, est: Estimator) -> bool:
    try:
        e = est(plan)
    except PlanError:
        return False
    return e.fit_peak.high <= e.limit_bytes


def _largest(values: list[int], make: Callable[[int], Plan], est: Estimator) -> int | None:
    """Largest v in ascending ``values`` whose plan fits, assuming fit is monotone."""
    if not values or not _fits(make(values[0]), est):
        return None
    lo, hi, step = 0, None, 1
    while hi is None:  # gallop: lo fits
        nxt = lo + step
        if nxt >= len(values):
            if _fits(make(values[-1]), est):
                return values[-1]
            hi = len(values) - 1
        elif _fits(make(values[nxt]), est):
            lo, step = nxt, step * 2
        else:
            hi = nxt
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _fits(make(values[mid]), est):
            lo = mid
        else:
            hi = mid
    return values[lo]


def largest_micro_batch(
    plan: Plan, bound: int = MAX_MICRO_BATCH, estimator: Estimator | None = None
) -> FitResult:
    """The largest micro-batch that fits the plan's layout.

    With ``hold_fixed = global_batch``, or a global batch the user set (a
    hyperparameter: :func:`engine.layout.point.keeps_global_batch`), only micro-batches
    that divide the per-replica batch are legal, and accumulation shrinks to keep the
    global batch.
    """
    est = estimator or estimate
    b, par = plan.batch, plan.parallelism
    replicas = par.dp
    if keeps_global_batch(plan):
        target = target_global_batch(plan)
        per_replica = target // replicas if target % replicas == 0 else 0
        values = [m for m in range(1, min(bound, per_replica) + 1) if per_replica % m == 0]
        searched = (
            f"micro-batches dividing the {per_replica:,} sequences per replica (the global "
            f"batch {target:,} is held; accumulation shrinks as the micro-batch grows)"
        )

        def make(m: int) -> Plan:
            upd = {"micro_batch": m, "grad_accum": per_replica // m}
            return plan.model_copy(update={"batch": b.model_copy(update=upd)})
    else:
        values = list(range(1, bound + 1))
        searched = f"micro-batches 1 to {bound:,} (accumulation kept)"

        def make(m: int) -> Plan:
            upd = {"micro_batch": m, "global_batch": None}
            return plan.model_copy(update={"batch": b.model_copy(update=upd)})

    best = _largest(values, make, est)
    top = values[-1] if values else 0
    return _result("batch.micro_batch", best, top, "micro-batch", searched, "")


def longest_sequence(
    plan: Plan, bound: int | None = None, step: int = 128, estimator: Estimator | None = None
) -> FitResult:
    """The longest sequence (a multiple of ``step`` × CP) that fits the plan's layout.

    The bound defaults to the larger of the model's max positions and the plan's
    sequence.
    """
    est = estimator or estimate
    unit = step * plan.parallelism.cp
    top = bound or max(plan.model.architecture.max_position, plan.batch.seq_len)
    values = list(range(unit, top + 1, unit))

    def make(s: int) -> Plan:
        return plan.model_copy(update={"batch": plan.batch.model_copy(update={"seq_len": s})})

    best = _largest(values, make, est)
    searched = f"sequences of {unit:,} to {top:,} tokens in steps of {unit:,}" + (
        f" ({step} × CP {plan.parallelism.cp})" if plan.parallelism.cp > 1 else ""
    )
    return _result(
        "batch.seq_len", best, values[-1] if values else 0, "sequence", searched, "tokens"
    )


def _result(
    field: str, best: int | None, top: int, what: str, searched: str, unit: str
) -> FitResult:
    if best is None:
        return FitResult(
            field, None, top, False, f"even the smallest {what} does not fit", searched, unit
        )
    if best >= top:
        return FitResult(
            field,
            best,
            top,
            True,
            f"every {what} up to the search bound {top} fits: the ledger's peak does not "
            f"reach the limit within it",
            searched,
            unit,
        )
    return FitResult(
        field,
        best,
        top,
        False,
        f"{what} {best:,} is the largest whose high estimate fits",
        searched,
        unit,
    )
