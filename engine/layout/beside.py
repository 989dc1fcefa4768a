"""What the counts show beside them: the layouts of the procurement size (the one to
run when the count's layout leaves GPUs idle, :func:`fill_bought`; the other fitting
layouts ranked by headroom and the rejected ones with their reasons,
:func:`ranked_alternatives`), and for a count that finds nothing the closest layout
(:func:`closest_candidates`).

The alternatives estimate at most :data:`ALTERNATIVES_EVALUATED` legal layouts, in
preference order, and none whose peak floor is over the limit
(:mod:`engine.layout.proofs.bound`).

The closest: where a count finds nothing, its reason names the closest layout estimated
(node ledgers fitting first, then the most headroom: :func:`closeness`), so the user sees
how far the plan is from fitting. The search itself estimates almost nothing then: the
peak floor proves most shapes over the limit without an estimate, and the closest of
those says little. So :func:`closest_candidates` estimates a bounded set besides: every
legal shape — TP across nodes too, the arithmetic minimum's shapes (a superset of the
practical ones) — at the largest DP of each of its regimes up to the search bound.
Within a regime a rank's peak never rises with DP but by the FSDP padding
(:mod:`engine.layout.proofs.regimes`), so a regime's largest DP is its least peak, near
enough.

Most of those are never estimated: they are taken best-first by a lower bound on their
high estimate, and the first whose bound is at least the best high found so far ends
the walk — every candidate left is at least as high, so none is closer. The bounds:

- a shape's, the least peak floor (:mod:`engine.layout.proofs.bound`) at its batches'
  largest DPs: the floor only falls as DP grows with the batch held, so it is at most
  the floor at each regime's largest DP, and the shape's regimes are not worked out
  until it is the lowest bound left (a dense model's shape has thousands of DP values);
- a regime's largest DP's, its peak floor, then (only when that is below the best) the
  state bound's high (:mod:`engine.layout.proofs.stage_bounds`), tighter and costlier.

Exact for the ranking the reason uses, with one exception: a layout whose node ledgers
fail ranks below every one whose ledgers fit, and no bound speaks of them, so nothing is
ruled out until a layout with fitting ledgers is found; a plan whose every candidate fails
them would estimate them all, so the walk stops after :data:`MOST_ESTIMATES` estimates
(and says so: :func:`closest_candidates` returns False).
``tests/engine/layout/test_closest.py`` compares the walk with estimating every
candidate.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

from engine.layout.minimum import Criterion, Found
from engine.layout.point import (
    Layout,
    accumulation_words,
    batch_change,
    shape_words,
    step_words,
    target_global_batch,
)
from engine.layout.proofs.evaluate import Budget, Evaluator, Outcome
from engine.layout.proofs.regimes import SearchMemo
from engine.layout.shapes import (
    Lattice,
    LayoutPreferences,
    Rejected,
    enumerate_layouts,
    every_layout_refused,
    layout_of,
)
from engine.plan import Plan
from engine.units import fmt_bytes

ALTERNATIVES_SHOWN, ALTERNATIVES_EVALUATED = 5, 16
"""Fitting layouts shown, and legal layouts of the procurement size estimated for them in
preference order (the lattice of a large world can hold hundreds)."""


def _sized(
    ev: Evaluator, size: int, prefs: LayoutPreferences
) -> tuple[Lattice, tuple[Layout, ...], list[Layout]]:
    """The lattice of ``size``, its first :data:`ALTERNATIVES_EVALUATED` legal layouts,
    and those of them whose peak floor alone is over the limit (no fit, no estimate)."""
    lattice = enumerate_layouts(ev.plan, size, prefs)
    floors, limit = ev.floors, ev.plan.hbm_limit_bytes
    legal = lattice.legal[:ALTERNATIVES_EVALUATED]
    return lattice, legal, [x for x in legal if floors is not None and floors.over(x, limit)]


def fill_bought(ev: Evaluator, found: Found | None, prefs: LayoutPreferences) -> Found | None:
    """``found`` with a layout of exactly the bought size when one fits (those that keep
    the plan's global batch first, then in preference order), else ``found``.

    The search ranks layouts by cost (GPUs paid for), then preference, so a 12-rank
    layout on two 8-GPU nodes is as good to it as a 16-rank one; a buyer pays for 16, and
    a fitting layout of all 16 leaves more room per rank. The count is unchanged (both
    cost the same), so the counts still equal brute force (``test_search_exact.py``);
    only the layout behind it changes, and the plan's own layout still wins."""
    if found is None or found.outcome.layout.world_size >= found.cost:
        return found
    if found.outcome.layout == layout_of(ev.plan):
        return found
    target = target_global_batch(ev.plan)
    _, legal, floored = _sized(ev, found.cost, prefs)
    ranked = sorted(legal, key=lambda lay: lay.global_batch != target)  # stable: prefs
    for lay in ranked:
        if lay not in floored and (o := ev(lay)).fits_high:
            return Found(o, found.cost)
    return found


def ranked_alternatives(
    ev: Evaluator, first: Found | None, max_gpus: int, prefs: LayoutPreferences
) -> tuple[tuple[Outcome, ...], tuple[Rejected, ...]]:
    """Fitting layouts of the procurement size by headroom, and the rejected ones: the
    high estimate alone ranks them."""
    if first is None:
        return (), ()
    lattice, legal, floored = _sized(ev, min(first.cost, max_gpus), prefs)
    outs = [ev(x) for x in legal if x not in floored]
    chosen = first.outcome.layout
    fitting = [o for o in outs if o.fits_high and o.layout != chosen]
    fitting.sort(key=lambda o: (-o.headroom, o.layout.preference()))
    failed = [Rejected(o.layout, (f"estimate refused it: {o.error}",)) for o in outs if not o.ok]
    # "why doesn't it fit": the legal layouts of this size that memory rules out
    over = [Rejected(o.layout, memory_words(o)) for o in outs if o.ok and not o.fits_high]
    limit = fmt_bytes(ev.plan.hbm_limit_bytes)
    over += [
        Rejected(x, (f"memory: its peak floor alone exceeds the limit {limit}",)) for x in floored
    ]
    return tuple(fitting[:ALTERNATIVES_SHOWN]), (*lattice.rejected, *failed, *over)


def memory_words(o: Outcome) -> tuple[str, ...]:
    """Why memory rules a legal layout out: HBM per rank over the limit, or host RAM /
    NVMe per node."""
    if o.high > o.limit:  # one wording for all (a summary counts them as one kind)
        return (f"memory: the high estimate per rank exceeds the limit {fmt_bytes(o.limit)}",)
    return tuple(f"memory: {p}" for p in o.node_problems)


MOST_ESTIMATES = 512
"""New estimates :func:`closest_candidates` makes at most: a cap for plans whose every
candidate fails its node ledgers, far above what a walk with fitting ledgers needs."""

_ESTIMATE, _REFINE, _SHAPE = range(3)
"""What a queued candidate awaits: its estimate, its state bound, its regimes. At equal
bounds estimates come first, so a walk without bounds (a caller's estimator) estimates
shape by shape instead of working out every shape's regimes first."""


def closeness(o: Outcome) -> tuple[bool, int]:
    """How close ``o`` is to fitting, as a key: node ledgers fitting first, then the
    larger headroom (``max`` keeps the earliest of equals)."""
    return not o.node_problems, o.headroom


def closest_candidates(
    ev: Evaluator,
    memo: SearchMemo,
    shapes: Sequence[Layout],
    max_gpus: int,
    budget: Budget,
) -> bool:
    """Estimate (into ``ev``) the candidates of the module's docstring that could be
    closer than the closest failing layout ``ev`` holds: ``shapes`` (in preference
    order, which breaks ties) at the largest DP of each regime up to ``max_gpus``. True
    when every candidate is estimated or ruled out by its bound; False when the walk
    stopped at :data:`MOST_ESTIMATES`. Raises
    :class:`~engine.layout.proofs.evaluate.BudgetSpent` when the budget runs out."""
    floors = ev.floors
    state = None if floors is None else memo.state_floors(floors)
    failed = (o for o in ev.outcomes if o.ok and not o.fits_high)
    best = max(failed, key=closeness, default=None)
    fewest = ev.fewest_ranks
    # bound, what it awaits, the shape's preference order, arrival, layout, fewest DP
    queue: list[tuple[int, int, int, int, Layout, int]] = []
    for order, shape in enumerate(shapes):
        m = shape.model_parallel
        if m > max_gpus:
            continue
        fewest_dp = -(-fewest // m)
        tops = memo.batch_tops(shape, max_gpus // m, fewest_dp)
        if tops:
            bound = 0 if floors is None else min(floors(lay) for lay in tops)
            queue.append((bound, _SHAPE, order, 0, shape, fewest_dp))
    heapq.heapify(queue)
    arrival, calls = 0, ev.calls
    while queue:
        bound, kind, order, _, lay, fewest_dp = heapq.heappop(queue)
        if best is not None and not best.node_problems and bound >= best.high:
            return True  # every candidate left is at least as high
        arrival += 1
        if kind == _SHAPE:
            top = max_gpus // lay.model_parallel
            for group in memo.regimes(lay, top, fewest_dp).values():
                last = group[-1]  # the regime's largest DP
                at = 0 if floors is None else floors(last)
                then = _ESTIMATE if state is None else _REFINE
                heapq.heappush(queue, (at, then, order, arrival, last, 0))
                arrival += 1
        elif kind == _REFINE and state is not None:
            refined = max(bound, state(lay)[1])
            heapq.heappush(queue, (refined, _ESTIMATE, order, arrival, lay, 0))
        else:
            if ev.calls - calls >= MOST_ESTIMATES:  # layouts estimated before are free
                return False
            budget.check()
            o = ev(lay)
            if o.ok and not o.fits_high and (best is None or closeness(o) > closeness(best)):
                best = o
    return True


@dataclass(frozen=True, slots=True)
class Count:
    """One of the counts: the layout behind it (if any), GPUs paid for, and why."""

    gpus: int | None
    layout: Layout | None
    outcome: Outcome | None
    reason: str

    @property
    def world_size(self) -> int | None:
        return self.layout.world_size if self.layout else None


def fit_words(o: Outcome) -> str:
    return (
        f"high estimate {fmt_bytes(o.high)} per rank within the limit "
        f"{fmt_bytes(o.limit)} ({fmt_bytes(o.headroom)} to spare)"
    )


def none_fits(
    plan: Plan,
    outcomes: list[Outcome],
    max_gpus: int,
    criterion: Criterion,
    stopped: bool,
    every: bool = False,
) -> Count:
    """A count that found nothing: why, naming the closest of ``outcomes`` that fails
    the criterion (node ledgers fitting first, then the most headroom; the earliest of
    equals); ``every``: those hold the closest of every shape's largest DP per regime
    (:mod:`engine.layout.beside`), which the reason then says."""
    what = criterion.figure
    tried = [o for o in outcomes if o.ok and not criterion.accept(o)]
    bound = f"up to {max_gpus} GPUs" + (
        " (the search stopped at its time budget)" if stopped else ""
    )
    if not tried:
        errors = sorted({o.error or "" for o in outcomes})
        refused = "; ".join(every_layout_refused(plan))
        why = f"; estimates failed: {errors[0]}" if errors else ""
        why = f"; every layout is refused: {refused}" if refused else why
        return Count(None, None, None, f"no legal layout {bound}{why}")
    best = max(tried, key=closeness)
    need = best.high if what == "high" else best.low
    nodes = "".join(f"; {p}" for p in best.node_problems)
    of = " (of the search's estimates and every shape's largest DP per regime, TP within a node)"
    of = of if every else " estimated"
    return Count(
        None,
        None,
        best,
        f"no layout {bound} fits by the {what} estimate; the closest{of}, "
        f"{best.layout.label()}, needs {fmt_bytes(need)} per rank against a limit of "
        f"{fmt_bytes(best.limit)}{nodes}",
    )


def batch_words(plan: Plan, lay: Layout) -> str:
    moved = batch_change(plan, lay.global_batch)
    return accumulation_words(plan, lay.pp, lay.grad_accum) + (
        f"; global batch {step_words(lay.global_batch, plan.batch.seq_len)}"
        + (f" ({moved})" if moved else "")
    )


def arith_count(plan: Plan, found: Found, g: int) -> Count:
    o = found.outcome
    w = o.layout.world_size
    nodes = -(-w // g)
    own = " (the plan's own layout)" if o.layout == layout_of(plan) else ""
    return Count(
        w,
        o.layout,
        o,
        f"{w} ranks ({o.layout.label()}{own}; {batch_words(plan, o.layout)}) is the least "
        f"whose {fit_words(o)}, counting ranks, not nodes, TP any divisor within a node "
        f"(rounded up: {nodes} node(s) of {g}); every smaller count's high estimate exceeds "
        f"the limit or cannot be laid out with PP ≤ {plan.policy.max_pp} (policy.max_pp)",
    )


def first_count(plan: Plan, found: Found, g: int, rounding: str, own: Outcome | None) -> Count:
    o = found.outcome
    w = o.layout.world_size
    paid = shape_words(found.cost, g, rounding)
    idle = f", {found.cost - w} of them idle unless DP grows" if found.cost > w else ""
    if own is not None and o.layout == own.layout:
        head = f"the plan's own layout {o.layout.label()} on {w} ranks fits"
    else:
        head = (
            f"{o.layout.label()} on {w} ranks is the first legal layout (TP inside a node, "
            f"power-of-two TP, whole heads, layers, sequence and experts, a full pipeline "
            f"of PP ≤ {plan.policy.max_pp} (policy.max_pp), reachable batch) that fits"
        )
    mine = ""
    if own is not None and o.layout != own.layout:
        if own.fits_high:
            mine = (
                f"; the plan's own layout {own.layout.label()} also fits, on "
                f"{own.layout.world_size} ranks"
            )
        elif own.ok:
            extra = "".join(f"; {p}" for p in own.node_problems)
            mine = (
                f"; the plan's own layout {own.layout.label()} does not fit "
                f"({fmt_bytes(own.high)} per rank{extra}): lay the plan out as above"
            )
    return Count(
        found.cost,
        o.layout,
        o,
        f"{head}: its {fit_words(o)}; {batch_words(plan, o.layout)}; procure {paid}{idle}{mine}",
    )


def low_count(found: Found) -> Count:
    o = found.outcome
    why = f"{o.layout.label()} fits by the low estimate {fmt_bytes(o.low)} on {found.cost} GPUs"
    return Count(found.cost, o.layout, o, why)


def validation_words(low: Found | None, high: Found | None) -> str:
    if high is None:
        return "no layout fits by the high estimate within the search bound"
    if low is None or low.cost >= high.cost:
        return (
            f"low and high estimates agree: {high.cost} GPUs; the range does not straddle the limit"
        )
    return (
        f"the range straddles the limit: the low estimate fits on {low.cost} GPUs "
        f"({low.outcome.layout.label()}) but the high estimate needs {high.cost} "
        f"({high.outcome.layout.label()}); measure the peak on {low.cost} GPUs before "
        f"buying, and take {high.cost} if it exceeds the limit"
    )
