"""What one GPU-count search knows about a shape's DP values: the candidates, their
regimes (the DP ranges within which a rank's peak never rises, up to the FSDP padding
slack), and what probes have proven about each regime.

Everything here is keyed by the shape and is the same in every round of the growing
bound and in all three counts' searches of one :func:`engine.layout.counts.gpu_counts`
call (one plan, one set of ``pipeline_full`` / ``max_padding_share`` preferences), so
:class:`SearchMemo` computes a DP's layout, its padding verdict and its regime once.

:meth:`ShapeJudge.regime <engine.layout.candidates.ShapeJudge.regime>` is a proof: its
key lists, from the ledger's rows, every step at which a
rank's peak may rise with DP (a communicator appearing, an expert or HSDP shard group
moving, ranks per node growing). A row that grows with DP anywhere else must add its
step here, or the search skips a fitting layout:
``tests/engine/layout/test_search_exact.py::test_counts_equal_brute_force`` catches it.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from engine.errors import Problem
from engine.layout.candidates import RegimeKey, ShapeJudge, held_micro_batch
from engine.layout.point import Layout
from engine.layout.proofs.bound import PeakFloors
from engine.layout.proofs.cross_ep import CrossEp
from engine.layout.proofs.stage_bounds import LowFloors, StateFloors
from engine.plan import Plan


def _dp(layout: Layout) -> int:
    return layout.dp


def below_dp(group: Sequence[Layout], dp: int) -> Sequence[Layout]:
    """The layouts of an ascending ``group`` with DP below ``dp``."""
    return group[: bisect_left(group, dp, key=_dp)]


def dp_span(group: Sequence[Layout], above: int, upto: int | None) -> Sequence[Layout]:
    """The layouts of an ascending ``group`` of DP above ``above`` and (unless None) at
    most ``upto``."""
    start = bisect_right(group, above, key=_dp)
    end = len(group) if upto is None else bisect_right(group, upto, key=_dp)
    return group[start:end]


@dataclass
class Known:
    """What the search has proven about one regime of one shape under one criterion:
    every candidate DP up to ``dead_upto`` fails, and ``fits_at`` (if known) is
    accepted. Kept across the growing bounds and the three counts' searches (the
    arithmetic minimum's relaxed shapes include the practical ones), so a regime a
    probe proved dead is never probed again below that DP."""

    dead_upto: int = 0
    fits_at: int | None = None

    def unknown(self, group: Sequence[Layout]) -> Sequence[Layout]:
        """The part of an ascending regime ``group`` whose answer is not yet known: above
        the proven failures, and no further than the smallest known fit."""
        return dp_span(group, self.dead_upto, self.fits_at)

    def learn(self, group: Sequence[Layout], found: Layout | None) -> None:
        """Record :meth:`_Shape.smallest`'s answer over ``group``: every layout before
        ``found`` (all of them when None) fails."""
        below = group if found is None else below_dp(group, found.dp)
        if below:
            self.dead_upto = max(self.dead_upto, below[-1].dp)
        if found is not None:
            self.fits_at = found.dp

    def learn_one(self, dp: int, accepted: bool, all_below_fail: bool) -> None:
        """Record one estimate made by the other criterion's search at ``dp`` of this
        regime, judged by this criterion: accepted, it bounds the regime's smallest fit
        from above; failing with every smaller DP of the regime (``all_below_fail``),
        every candidate up to ``dp`` fails."""
        if accepted:
            self.fits_at = dp if self.fits_at is None else min(self.fits_at, dp)
        elif all_below_fail:
            self.dead_upto = max(self.dead_upto, dp)


@lru_cache(maxsize=1)
def _low_floors(floors: PeakFloors) -> LowFloors:
    """The low bound over ``floors`` (keyed by the object: one per plan, kept across
    searches as :func:`engine.layout.proofs.bound.peak_floors` keeps the floors), its values
    cached: the GUI, the report and the CLI search the same plan again."""
    return LowFloors(floors)


@lru_cache(maxsize=1)
def _state_floors(floors: PeakFloors) -> StateFloors:
    """The state bound over ``floors``, kept as :func:`_low_floors` is."""
    return StateFloors(floors)


@lru_cache(maxsize=1)
def _cross_ep(floors: PeakFloors) -> CrossEp:
    """The cross-EP rule of the floors' plan over its state bound, kept as
    :func:`_low_floors` is."""
    return CrossEp(floors.plan, _state_floors(floors), _low_floors(floors))


@lru_cache(maxsize=1)
def _shape_points(plan: Plan, full: bool, padding: float) -> dict[Layout, _ShapePoints]:
    """The shapes' candidates of one plan under one ``pipeline_full`` /
    ``max_padding_share`` pair, kept across searches as the floors are
    (:func:`engine.layout.proofs.bound.peak_floors`): they depend on nothing else, and a dense
    model's search judges tens of thousands of DP values."""
    return {}


@lru_cache(maxsize=1)
def _shape_judges(plan: Plan, full: bool, padding: float) -> dict[Layout, ShapeJudge]:
    """The shapes' judges (:class:`ShapeJudge`) of one plan under one ``pipeline_full`` /
    ``max_padding_share`` pair, kept as :func:`_shape_points` keeps the candidates."""
    return {}


Proofs = dict[tuple[Layout, RegimeKey, str], Known]
"""Per (shape template, regime, criterion figure): what is known (:class:`Known`)."""


@dataclass
class SearchMemo:
    """What one ``gpu_counts`` call's searches share: per shape, each DP's layout and
    regime (None where the padding preference refuses it), and the regimes' proofs."""

    plan: Plan
    full: bool = True
    padding: float = 1.0
    proofs: Proofs = field(default_factory=dict)
    _points: dict[Layout, _ShapePoints] | None = None
    _judges: dict[Layout, ShapeJudge] | None = None
    free_over: dict[tuple[object, ...], int] = field(default_factory=dict)
    """Per (TP, PP, CP, expert TP, split, figure): the largest top at which the peak
    floor by that figure was over the limit at DP = top itself (:meth:`over_at_top`)."""
    free_under: dict[tuple[object, ...], int] = field(default_factory=dict)
    """Per the same key: the smallest top at which that floor was within the limit (at
    every larger top it is too: it only falls as DP grows)."""

    def over_at_top(
        self, floors: PeakFloors, shape: Layout, top: int, figure: str, limit: int
    ) -> bool:
        """Whether the peak floor by ``figure`` is over ``limit`` (the plan's, one per
        memo) at DP ``top`` with the shape's batch, the micro-batch held (one batch per
        PP at every DP): then it is over at every DP up to ``top`` — the floor only rises
        as DP falls with the batch held — and so at every candidate of the shape,
        whatever its EP; within it at ``top``, it is within at every larger top, and the
        verdict is remembered both ways.

        The floor reads no EP (:mod:`engine.layout.proofs.bound` takes it at the widest) and
        no legality of the DP (a formula of the ranks per stage), so one verdict stands
        for every EP of a (TP, PP, CP, expert TP, split): a MoE model's shapes come in
        sets of up to nine EPs with one floor, and most large-model shapes are over it
        in the first search rounds. Checked before the shape's candidates are built:
        where it is not over at ``top`` the search goes on to the candidates' own
        largest DPs (:meth:`batch_tops`) as before, so it drops no shape that those did
        not."""
        key = (shape.tp, shape.pp, shape.cp, shape.etp, shape.pp_split, figure)
        if top <= self.free_over.get(key, 0):
            return True
        if top >= self.free_under.get(key, 1 << 62):  # EP siblings and later rounds
            return False
        batch = held_micro_batch(self.plan, self.padding, shape.pp)
        if isinstance(batch, Problem):
            return False
        if not floors.over(shape.at_dp(top, *batch), limit, figure):
            self.free_under[key] = top
            return False
        self.free_over[key] = top
        return True

    def low_floors(self, floors: PeakFloors) -> LowFloors:
        """The low bound over ``floors``, one per floors (:func:`_low_floors`)."""
        return _low_floors(floors)

    def state_floors(self, floors: PeakFloors) -> StateFloors:
        """The state bound over ``floors``, one per floors (:func:`_state_floors`)."""
        return _state_floors(floors)

    def cross_ep(self, floors: PeakFloors) -> CrossEp | None:
        """The cross-EP rule of the floors' plan, one per floors (:func:`_cross_ep`);
        None where it does not hold (a dense model, HSDP, …: no probe asks it)."""
        got = _cross_ep(floors)
        return got if got.applies else None

    def known(self, shape: Layout, key: RegimeKey, figure: str) -> Known:
        """What is proven about a regime under a criterion."""
        got = self.proofs.get((shape, key, figure))
        if got is None:
            got = self.proofs[shape, key, figure] = Known()
        return got

    def batch_tops(self, shape: Layout, top: int, fewest_dp: int) -> list[Layout]:
        """The shape at each batch's largest candidate DP of ``fewest_dp``…``top``, padding
        preference aside: a bound that never rises as DP falls with the batch held (the
        peak floor, :mod:`engine.layout.proofs.bound`) is over the limit at every candidate when
        it is at these — so the search can drop a shape before building its regimes."""
        judge = self.judge(shape)
        dps = judge.candidates(top)
        if judge.batch is not None:  # the batch does not move with DP: the largest only
            return [judge.layout(dps[-1])] if len(dps) and dps[-1] >= fewest_dp else []
        tops: dict[tuple[int, int], Layout] = {}
        for d in reversed(dps):
            if d < fewest_dp:
                break
            lay = judge.layout(d)
            tops.setdefault((lay.micro_batch, lay.grad_accum), lay)
        return list(tops.values())

    def judge(self, shape: Layout) -> ShapeJudge:
        """The shape's :class:`ShapeJudge` under this memo's plan and preferences, built once
        (kept across searches as the candidates are: :func:`_shape_judges`)."""
        if self._judges is None:
            self._judges = _shape_judges(self.plan, self.full, self.padding)
        got = self._judges.get(shape)
        if got is None:
            got = self._judges[shape] = ShapeJudge(self.plan, shape, self.padding, self.full)
        return got

    def regimes(self, shape: Layout, top: int, fewest_dp: int) -> dict[RegimeKey, Sequence[Layout]]:
        """The shape's candidate layouts of DP ``fewest_dp``…``top`` by regime, each
        regime's ascending, the regimes in the order their smallest DP comes."""
        if self._points is None:
            self._points = _shape_points(self.plan, self.full, self.padding)
        points = self._points.get(shape)
        if points is None or points.fewest_dp > fewest_dp:
            points = self._points[shape] = _ShapePoints(fewest_dp)
        points.extend(self, shape, top)
        return points.window(fewest_dp, top)


@dataclass
class _ShapePoints:
    """One shape's candidate layouts from ``fewest_dp`` up to the largest ``top`` asked
    for so far, by regime, each regime's DP values and layouts ascending. The candidates
    up to a smaller top are a prefix of those up to a larger one
    (:func:`~engine.layout.candidates.dp_candidates`), so each DP is judged once and every
    search round takes a window of these lists by bisection."""

    fewest_dp: int
    upto: int = 0
    dps: dict[RegimeKey, list[int]] = field(default_factory=dict)
    layouts: dict[RegimeKey, list[Layout]] = field(default_factory=dict)

    def extend(self, memo: SearchMemo, shape: Layout, top: int) -> None:
        """Judge the candidates above what is done, up to ``top``."""
        if top <= self.upto:
            return
        judge = memo.judge(shape)
        cands = judge.candidates(top)
        dps, layouts, make = self.dps, self.layouts, judge.layout
        last: RegimeKey | None = None
        for d in cands[bisect_right(cands, max(self.upto, self.fewest_dp - 1)) :]:
            if judge.refused(d):
                continue
            key = judge.regime(d)
            if key != last:  # the regime changes at few DP values: look its lists up then
                last, at, lays = key, dps.setdefault(key, []), layouts.setdefault(key, [])
            at.append(d)
            lays.append(make(d))
        self.upto = top

    def window(self, fewest_dp: int, top: int) -> dict[RegimeKey, Sequence[Layout]]:
        """Each regime's layouts of DP ``fewest_dp``…``top``, regimes ordered by their
        smallest DP there (the order a walk up the DP values meets them)."""
        spans = []
        for key, dps in self.dps.items():
            i, j = bisect_left(dps, fewest_dp), bisect_right(dps, top)
            if i < j:
                spans.append((dps[i], key, i, j))
        spans.sort(key=lambda span: span[0])
        return {key: self.layouts[key][i:j] for _, key, i, j in spans}
