"""The minimum-rank search over the lattice, with the fewest estimates that are sound.

Assumption (stated, and true of every row whose size depends on DP): for a fixed
model-parallel shape (TP, PP, CP, EP), adding data-parallel ranks never raises a rank's
peak — sharded states only shrink with more shards and nothing per rank grows with DP.
So per shape the fitting DP values form an upper interval, found by galloping up from
the smallest candidate then bisecting. Shapes are visited in preference order; once a
layout is found, a shape is probed only if it could beat it, with one estimate at its
largest improving DP (if that does not fit, nothing smaller of that shape does).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from engine.errors import Problem
from engine.layout.evaluate import Evaluator, Outcome
from engine.layout.lattice import Layout, batch_for, held_batch
from engine.legality import rules
from engine.plan import Plan

Accept = Callable[[Outcome], bool]
Cost = Callable[[int], int]


@dataclass(frozen=True, slots=True)
class Found:
    """The best layout a search found and the cost (GPUs paid for) it was ranked by."""

    outcome: Outcome
    cost: int


def procurement(world_size: int, gpus_per_node: int, rounding: str) -> int:
    """GPUs paid for to run ``world_size`` ranks: whole nodes, or exact GPUs."""
    if rounding == "gpu":
        return world_size
    return -(-world_size // gpus_per_node) * gpus_per_node


def dp_candidates(plan: Plan, shape: Layout, max_dp: int) -> Sequence[int]:
    """DP values the shard-group, EP-folding and batch rules allow for ``shape``,
    ascending, up to ``max_dp``."""
    b, par = plan.batch, plan.parallelism
    step = rules.fold_step(shape.ep, shape.etp, shape.tp, shape.cp, plan.model.architecture)
    return rules.dp_values(max_dp, par.shard_group_size, held_batch(plan), b.micro_batch, step)


def _truncate(values: Sequence[int], max_value: int) -> Sequence[int]:
    if isinstance(values, range):
        return range(values.start, min(values.stop, max_value + 1), values.step)
    return [v for v in values if v <= max_value]


def _layout(plan: Plan, shape: Layout, dp: int) -> Layout:
    batch = batch_for(plan, dp)
    if isinstance(batch, Problem):  # dp_candidates only yields reachable batches
        raise AssertionError(batch.message)
    return replace(shape, dp=dp, micro_batch=batch[0], grad_accum=batch[1])


def _first_fitting(
    ok: Callable[[Layout], bool],
    plan: Plan,
    shape: Layout,
    dps: Sequence[int],
) -> Layout | None:
    """The layout of the smallest DP in ``dps`` that ``ok`` accepts (monotone in DP).

    The largest DP is tried first: if it fails, no smaller DP can pass (one estimate
    for a shape that cannot work). Otherwise gallop up from the smallest (answers are
    usually small) and bisect.
    """
    n = len(dps)
    if n == 0 or not ok(_layout(plan, shape, dps[-1])):
        return None
    hi, lo, i, step = n - 1, -1, 0, 1
    while i < hi:  # gallop: indices 0, 1, 3, 7, ... (lo never passes, hi passes)
        if ok(_layout(plan, shape, dps[i])):
            hi = i
            break
        lo, i, step = i, i + step, step * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(_layout(plan, shape, dps[mid])):
            hi = mid
        else:
            lo = mid
    return _layout(plan, shape, dps[hi])


def _le(a: Layout, b: Layout) -> bool:
    """``a`` uses no more of any parallel dimension than ``b`` (same micro-batch)."""
    return (
        a.micro_batch == b.micro_batch
        and a.tp <= b.tp
        and a.pp <= b.pp
        and a.cp <= b.cp
        and a.ep <= b.ep
        and a.dp <= b.dp
    )


def search_min(
    ev: Evaluator,
    shapes: list[Layout],
    max_gpus: int,
    cost: Cost,
    accept: Accept,
    start: Found | None = None,
    monotone: bool = True,
) -> Found | None:
    """The accepted layout of least cost (ties: the earlier shape) up to ``max_gpus``.

    With ``monotone`` (the default) a layout that uses no more of every parallel
    dimension than a rejected one is rejected without an estimate, and one that uses
    at least as much of each as an accepted one is accepted: more ranks in any
    dimension divide the model or the tokens further and never raise a rank's peak.
    """
    best = start
    plan = ev.plan
    # Seed the dominance lists with every layout already estimated in this search.
    fails = [o.layout for o in ev.outcomes if o.ok and not accept(o)]
    fits = [o.layout for o in ev.outcomes if accept(o)]

    def ok(layout: Layout) -> bool:
        if monotone:
            if any(_le(layout, f) for f in fails):
                return False
            if any(_le(f, layout) for f in fits):
                return True
        passed = accept(ev(layout))
        (fits if passed else fails).append(layout)
        return passed

    for shape in shapes:
        m = shape.model_parallel
        if m > max_gpus:
            continue
        dps = dp_candidates(plan, shape, max_gpus // m)
        if best is not None:
            dps = _truncate(dps, _max_dp_below(best.cost, m, cost))
        got = _first_fitting(ok, plan, shape, dps)
        if got is not None:
            outcome = ev(got)
            c = cost(got.world_size)
            if accept(outcome) and (best is None or c < best.cost):
                best = Found(outcome, c)
    return best


def _max_dp_below(bound: int, m: int, cost: Cost) -> int:
    """The largest DP whose world size m·DP costs strictly less than ``bound``."""
    lo, hi = 0, (bound - 1) // m  # cost is monotone in the world size: bisect
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if cost(m * mid) < bound:
            lo = mid
        else:
            hi = mid - 1
    return lo
