"""The minimum-cost search over the lattice, pruned only where it is sound.

For one model-parallel shape (TP, PP, CP, EP, with its split), adding data-parallel
ranks shards the states further and, with the global batch held, lowers the
accumulation; nothing a rank holds grows — except at known steps, which split the DP
values into *regimes* (:mod:`engine.layout.proofs.regimes`) within which the
peak never rises:

- DP (× CP) 1 → 2 adds the data-parallel NCCL communicator and DDP's bucket;
- the expert DP group appears (folded EP) when it first exceeds one rank;
- under HSDP the shard group is the largest divisor of the DP ranks within a node,
  which moves non-monotonically, and the replicate group appears when a node is full —
  for the experts' shard group (of the expert DP ranks) as for the dense one;
- while the job does not fill a node, each DP value puts more ranks on it, and host
  RAM per node grows.

Within a regime the peak can still rise by the padding of all-gather outputs and
reduce-scatter inputs (FSDP pads each tensor to N equal chunks), which
:func:`engine.layout.proofs.evaluate.slack` bounds from above. So per regime: the largest
affordable DP is estimated first; if it fails by more than its slack, no smaller DP of
that regime fits (one estimate for a dead regime); otherwise the smallest fitting DP is
bisected, and a probe that fails within its slack is resolved by estimating the values
below it one by one. No monotonicity across shapes is assumed: shapes are pruned only by
cost (a shape whose fewest ranks cost as much as the best found cannot beat it), and
worlds below the floor of :func:`engine.layout.proofs.bound.fewest_ranks` (too few ranks
to hold the model states at all) are never estimated. Two things spare estimates without
changing an answer: a layout whose peak floor (:mod:`engine.layout.proofs.bound`:
activations, resident states, reserve, runtime — what no DP or EP takes away) already
exceeds the limit fails by the high estimate without one, and so does every smaller DP
of its regime with a floor as high; and what a probe proved
(:class:`~engine.layout.proofs.regimes.Known`) is kept across the growing bounds and the
three counts' searches, so a regime is never probed twice below what it is known to fail
at; an estimate made by one criterion's search proves what it can under the other
(:func:`_teach_other`). Across shapes one relation is used, proven row by row
(:mod:`engine.layout.proofs.cross_ep`): under FSDP2 a layout at a narrower EP holds at
least what it holds at a wider one less a known δ, by either figure, so a MoE shape's
narrow EPs fail by their widest EP's bound or estimate (made once for all of them).

This module reads no ledger row: every proof it applies lives in
:mod:`engine.layout.proofs`, which reads rows, and a row added to the ledger must be
checked against those proofs; the hypothesis test
``tests/engine/layout/test_search_exact.py::test_counts_equal_brute_force`` checks the
answers against brute force.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from engine.layout.candidates import RegimeKey
from engine.layout.point import Layout, held_batch
from engine.layout.proofs.bound import PeakFloors
from engine.layout.proofs.cross_ep import CrossEp
from engine.layout.proofs.evaluate import Budget, Evaluator, Outcome, slack
from engine.layout.proofs.regimes import SearchMemo, below_dp
from engine.layout.proofs.stage_bounds import LowFloors, StateFloors

Cost = Callable[[int], int]


@dataclass(frozen=True, slots=True)
class Found:
    """The best layout a search found and the cost (GPUs paid for) it was ranked by."""

    outcome: Outcome
    cost: int


@dataclass(frozen=True, slots=True)
class Criterion:
    """What a search accepts: the high (or low) estimate within the limit, and the node
    ledgers fitting."""

    figure: str  # "high" or "low"

    def accept(self, o: Outcome) -> bool:
        return o.fits_high if self.figure == "high" else o.fits_low

    def all_below_fail(self, o: Outcome, margin: int) -> bool:
        """Whether every smaller DP of the same regime fails too: the figure exceeds
        the limit by more than ``margin``, or host RAM / NVMe per node does not fit
        (they only grow with fewer ranks once a node is full)."""
        if not o.ok:
            return False
        if o.node_problems:
            return True
        value = o.high if self.figure == "high" else o.low
        return value - margin > o.limit


HIGH, LOW = Criterion("high"), Criterion("low")

_UNKNOWN, _UNDER, _OVER, _DEAD = range(4)
"""What :meth:`_Shape._low_floor` proves of a layout."""
_VERDICTS = {"unknown": _UNKNOWN, "under": _UNDER, "over": _OVER, "dead": _DEAD}
""":meth:`engine.layout.proofs.stage_bounds.LowFloors.judge`'s verdicts as those."""


@dataclass
class _Shape:
    """One shape's search over its regimes' DP values, with the estimates it needs."""

    ev: Evaluator
    criterion: Criterion
    budget: Budget
    floors: PeakFloors | None = None
    low_floors: LowFloors | None = None
    state_floors: StateFloors | None = None
    cross_ep: CrossEp | None = None
    estimated: list[Outcome] = field(default_factory=list)  # this regime's estimates
    batch_moves: bool = True  # False: every DP of a shape runs one batch (micro-batch held)
    limit: int = field(init=False)  # the plan's HBM limit, read once (asked per shape)

    def __post_init__(self) -> None:
        self.limit = self.ev.plan.hbm_limit_bytes

    def probe(self, layout: Layout, below: Sequence[Layout]) -> tuple[bool, bool]:
        """(accepted, every DP of ``below`` — the smaller ones of the regime — fails)."""
        self.budget.check()
        over = self._peak_over(layout)  # the cheapest bound first
        if not over:
            # the layout at a wider EP, by either figure: before the low bound, whose
            # shared rows it spares at every narrower EP (the wider layout's is one)
            cross, figure = self.cross_ep, self.criterion.figure
            if cross is not None and cross.over(
                layout, bool(below), self.limit, self.ev.peek, figure
            ):
                return False, True
            low = self._low_floor(layout, bool(below))
            if low == _DEAD:
                # for MoE models the low bound costs nearly an estimate (the shared rows,
                # which the estimate then reuses): it stands in for one one for one, as
                # an estimate would prove, with its slack, the smaller DPs failing too
                return False, True
            over = low != _UNDER and self._state_over(layout)
        if over:
            # the bounds only fall as DP grows with the batch held: check each other
            # batch's largest DP (``below`` ascends, so the dict keeps it); the smaller
            # DPs of this layout's batch are over as it is
            if not self.batch_moves:
                return False, True
            batches = {(lay.micro_batch, lay.grad_accum): lay for lay in below}
            batches.pop((layout.micro_batch, layout.grad_accum), None)
            return False, all(self._over_floor(lay) for lay in batches.values())
        o = self.ev(layout)
        self.estimated.append(o)
        if self.criterion.accept(o):
            return True, False
        return False, self.criterion.all_below_fail(
            o, slack(self.ev.plan, o, self.criterion.figure)
        )

    def floor_prunes(self) -> bool:
        """Whether :meth:`all_over_floor` can drop a shape (a peak floor is known)."""
        return self.floors is not None

    def all_over_floor(self, tops: list[Layout]) -> bool:
        """Whether the peak floor (:mod:`.proofs.bound`) by the criterion's figure is over the
        limit at every batch's largest DP ``tops`` of a shape, and so at every DP of it
        (the floor only falls as DP grows with the batch held, in every regime): each of
        its regimes' probes would prove it dead without an estimate, as :meth:`probe`
        does regime by regime — found at the shape, its DP values need no regimes."""
        floors = self.floors
        if floors is None or not tops:
            return False
        limit, figure = self.limit, self.criterion.figure
        return all(floors.over(lay, limit, figure) for lay in tops)

    def _over_floor(self, layout: Layout) -> bool:
        """Whether the layout's activations and resident share exceed the limit
        (:mod:`.proofs.bound`), or its activations and own states do
        (:mod:`.proofs.stage_bounds`), by the criterion's figure: it fails without an
        estimate."""
        return self._peak_over(layout) or self._state_over(layout)

    def _peak_over(self, layout: Layout) -> bool:
        """Whether the peak floor (:mod:`.proofs.bound`) by the criterion's figure exceeds the
        limit: the cheapest bound, its parts shared by every DP and EP of the shape."""
        floors = self.floors
        return floors is not None and floors.over(layout, self.limit, self.criterion.figure)

    def _state_over(self, layout: Layout) -> bool:
        """Whether the state bound (:mod:`.proofs.stage_bounds`) by the criterion's figure exceeds
        the limit."""
        if self.state_floors is None:
            return False
        return self.state_floors.over(layout, self.criterion.figure, self.limit)

    def _low_floor(self, layout: Layout, regime: bool) -> int:
        """What the layout's low fit peak bound (:mod:`.proofs.stage_bounds`, the low search only)
        proves: :data:`_DEAD`, a stage over the limit — and with ``regime`` over by more
        than its padding slack, which, as a failing estimate would, proves every smaller
        DP of its regime failing too; :data:`_OVER`, over by less than that (the layout
        fails, but only its estimate's slack may prove the smaller DPs failing: it is
        still estimated); :data:`_UNDER`, every stage within the limit; :data:`_UNKNOWN`,
        no bound known.

        Asked before the state bound (:mod:`.proofs.stage_bounds`), which it dominates: its
        shared rows hold the layout's persistent states (the state bound's rows) among
        others, at the same moments and over the same canonical activations, it takes
        every stage's largest low where the state bound takes the smallest, and its
        runtime rows are all those inside the capacity. So a layout within it is within
        the state bound, whose work (its own rows, nearly a bound's) is then spared; the
        state bound is asked only where it may still prove more — a whole regime over
        without the slack."""
        if self.low_floors is None or self.criterion.figure != "low":
            return _UNKNOWN
        return _VERDICTS[self.low_floors.judge(layout, regime)]

    def smallest(self, layouts: Sequence[Layout]) -> Layout | None:
        """The smallest accepted layout of one regime (ascending DP), soundly: a probe
        that fails within its slack proves nothing about the values below it, which are
        then estimated one by one."""
        if not layouts:
            return None
        ok, dead = self.probe(layouts[-1], layouts[:-1])
        if not ok:
            return None if dead else self._scan(layouts[:-1])
        lo, hi = -1, len(layouts) - 1  # everything ≤ lo fails, hi passes
        while hi - lo > 1:
            mid = (lo + hi) // 2
            ok, dead = self.probe(layouts[mid], layouts[lo + 1 : mid])
            if ok:
                hi = mid
                continue
            if not dead:
                found = self._scan(layouts[lo + 1 : mid])
                if found is not None:
                    return found
            lo = mid
        return layouts[hi]

    def _scan(self, layouts: Sequence[Layout]) -> Layout | None:
        for lay in layouts:
            if self.probe(lay, [])[0]:
                return lay
        return None


def search_min(
    ev: Evaluator,
    shapes: list[Layout],
    max_gpus: int,
    cost: Cost,
    criterion: Criterion,
    budget: Budget,
    start: Found | None,
    memo: SearchMemo,
) -> Found | None:
    """The accepted layout of least cost up to ``max_gpus``; among equal costs the
    earlier shape in preference order, then the smaller DP. ``memo`` holds the
    ``pipeline_full`` and ``max_padding_share`` preferences (they depend on DP, so they
    are applied here rather than to the shapes), the candidates and what earlier
    searches with the same preferences proved (:class:`~engine.layout.proofs.regimes.Known`)."""
    best = start
    floor = ev.fewest_ranks
    if floor > max_gpus:
        return best
    floors = ev.floors
    low_floors = None if floors is None else memo.low_floors(floors)
    state_floors = None if floors is None else memo.state_floors(floors)
    cross = None if floors is None else memo.cross_ep(floors)
    searcher = _Shape(ev, criterion, budget, floors, low_floors, state_floors, cross_ep=cross)
    searcher.batch_moves = held_batch(ev.plan) is not None
    # per model-parallel size, while the best cost stays: whether it is affordable at all
    # and the largest DP below the best cost (shapes share their sizes by the dozen)
    below: dict[int, int] = {}
    below_cost = None if best is None else best.cost
    prunes = searcher.floor_prunes()
    for shape in shapes:
        m = shape.model_parallel
        if m > max_gpus:
            continue
        if best is None:
            top = max_gpus // m
        else:
            if best.cost != below_cost:
                below, below_cost = {}, best.cost
            top = below.get(m, -1)
            if top < 0:
                affordable = cost(m) < best.cost
                top = below[m] = (
                    min(max_gpus // m, _max_dp_below(best.cost, m, cost)) if affordable else 0
                )
            if top == 0:
                continue
        fewest_dp = -(-floor // m)
        if (
            floors is not None
            and not searcher.batch_moves
            and memo.over_at_top(floors, shape, top, criterion.figure, searcher.limit)
        ):
            continue
        if prunes and searcher.all_over_floor(memo.batch_tops(shape, top, fewest_dp)):
            continue
        got: Layout | None = None
        for key, whole in memo.regimes(shape, top, fewest_dp).items():
            group: Sequence[Layout] = whole if got is None else below_dp(whole, got.dp)
            known = memo.known(shape, key, criterion.figure)
            group = known.unknown(group)
            if not group:  # all known: nothing to probe, learn or teach
                continue
            searcher.estimated = []
            found = searcher.smallest(group)
            known.learn(group, found)
            if searcher.estimated:
                _teach_other(memo, shape, key, criterion, searcher.estimated)
            if found is not None:
                got = found
        if got is not None:
            c = cost(got.world_size)
            if best is None or c < best.cost:
                best = Found(ev(got), c)
    return best


def _teach_other(
    memo: SearchMemo, shape: Layout, key: RegimeKey, criterion: Criterion, outs: list[Outcome]
) -> None:
    """What one criterion's estimates of a regime prove under the other criterion (an
    estimate has both figures): a layout that fits by the high estimate fits by the low
    one (low ≤ high), and one that fails the other figure by more than its slack fails
    it at every smaller DP of the regime — so the low search need not re-probe regimes
    the high search already settled, nor the arithmetic minimum those the low one did."""
    other = HIGH if criterion.figure == "low" else LOW
    known = memo.known(shape, key, other.figure)
    for o in outs:
        below = other.all_below_fail(o, slack(memo.plan, o, other.figure))
        known.learn_one(o.layout.dp, other.accept(o), below)


def search_growing(
    ev: Evaluator,
    shapes: list[Layout],
    max_gpus: int,
    cost: Cost,
    criterion: Criterion,
    budget: Budget,
    start: Found | None,
    memo: SearchMemo,
    first_bound: int,
) -> Found | None:
    """:func:`search_min`'s answer, searched within a bound that doubles from
    ``first_bound`` up to ``max_gpus``: a big model's many shapes cost one estimate per
    regime each at 16,384 GPUs, while most of them cannot even be laid out on the few
    hundred GPUs the answer needs. Exact, not a heuristic: the best layout of at most
    ``b`` ranks costs at most ``cost(b)``, and every layout of more ranks costs at least
    ``cost(b + 1)``; once the best found costs less than that, no larger layout can beat
    it or tie with it (ties keep the preference order of :func:`search_min`). Earlier
    rounds' estimates are memoised by the evaluator, their candidates and proofs by
    ``memo``. With a ``start`` of cost C the first bound is the largest world costing
    less than C (no better layout is larger): each later round would re-probe every
    regime at its new top, so one round at that bound usually needs fewer estimates —
    the same answer either way, since every round's answer is exact."""
    bound = max(1, first_bound)
    if start is not None:
        bound = max(bound, _max_dp_below(start.cost, 1, cost))
    while True:
        b = min(bound, max_gpus)
        found = search_min(ev, shapes, b, cost, criterion, budget, start, memo)
        if b >= max_gpus or (found is not None and found.cost < cost(b + 1)):
            return found
        bound *= 2


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
