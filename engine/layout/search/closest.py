"""The closest layout of a plan that fits nowhere: what a "no layout fits" reason names.

Where a count finds nothing, its reason names the closest layout estimated (node ledgers
fitting first, then the most headroom: :func:`engine.layout.search.counts._none_fits`),
so the user sees how far the plan is from fitting. The search itself estimates almost
nothing then: the peak floor proves most shapes over the limit without an estimate, and
the closest of those says little. So :func:`closest_candidates` estimates a bounded set
besides: every legal shape — TP across nodes too, the arithmetic minimum's shapes (a
superset of the practical ones) — at the largest DP of each of its regimes up to the
search bound. Within a regime a rank's peak never rises with DP but by the FSDP padding
(:mod:`engine.layout.proofs.regimes`), so a regime's largest DP is its least peak, near
enough.

Most of those are never estimated: they are taken best-first by a lower bound on their
high estimate, and the first whose bound is at least the best high found so far ends
the walk — every candidate left is at least as high, so none is closer. The bounds:

- a shape's, the least peak floor (:mod:`engine.layout.proofs.bound`) at its batches' largest
  DPs: the floor only falls as DP grows with the batch held, so it is at most the floor
  at each regime's largest DP, and the shape's regimes are not worked out until it is the
  lowest bound left (a dense model's shape has thousands of DP values);
- a regime's largest DP's, its peak floor, then (only when that is below the best) the
  state bound's high (:mod:`engine.layout.proofs.state_bound`), tighter and costlier.

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

from engine.layout.lattice.point import Layout
from engine.layout.proofs.evaluate import Evaluator, Outcome
from engine.layout.proofs.regimes import SearchMemo
from engine.layout.search.budget import Budget

MOST_ESTIMATES = 512
"""New estimates :func:`closest_candidates` makes at most: a cap for plans whose every
candidate fails its node ledgers, far above what a walk with fitting ledgers needs."""

_ESTIMATE, _REFINE, _SHAPE = range(3)
"""What a queued candidate awaits: its estimate, its state bound, its regimes. At equal
bounds estimates come first, so a walk without bounds (a caller's estimator) estimates
shape by shape instead of working out every shape's regimes first."""


def closer(o: Outcome, than: Outcome | None) -> bool:
    """Whether ``o`` is closer to fitting than ``than``: node ledgers fitting first, then
    the larger headroom (the earlier of equals stays)."""
    return than is None or (not o.node_problems, o.headroom) > (
        not than.node_problems,
        than.headroom,
    )


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
    :class:`~engine.layout.search.budget.BudgetSpent` when the budget runs out."""
    floors = ev.floors
    state = None if floors is None else memo.state_floors(floors)
    best: Outcome | None = None
    for o in ev.outcomes:
        if o.ok and not o.fits_high and closer(o, best):
            best = o
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
            if o.ok and not o.fits_high and closer(o, best):
                best = o
    return True
