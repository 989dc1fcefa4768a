"""Estimating layouts once each, and what the proofs read of an estimate: its padded
rows and the slack they allow (:func:`slack`).

The search asks :class:`Evaluator` for a layout's peak and treats a :class:`PlanError`
as "cannot run, for this reason"; each distinct layout is estimated at most once per
search. This is a proof module, not a black box: under the ledger's own estimate it
reads the rows FSDP pads (:func:`stage_padded`, through the stage's shared rows) for
the padding slack, and asks the rank floor and the peak floor (``bound``)
before anything is estimated; under a caller's estimator it reads only the rows that
estimator returns, and the floors stay off. A new row sized with FSDP padding must be
of :data:`PADDED_STATES`: ``tests/engine/layout/test_heaviest_padded.py`` compares the
shared-row reading with the rows.

The wall-clock budget one GPU-count search runs within: extreme plans (thousands of
layers) stop at it and say how far they got instead of running for minutes.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache

from engine.allocator.reserve import share_bound
from engine.errors import PlanError
from engine.estimate import Estimate, StageEstimate, estimate
from engine.layout.candidates import padding_context, share_in
from engine.layout.proofs.bound import fewest_ranks, peak_floors
from engine.layout.shapes import Layout, with_layout
from engine.ledger.peaks.runtime import reserve_factors
from engine.ledger.row import Row
from engine.ledger.stage_rows import shared_rows
from engine.plan import Plan

Estimator = Callable[[Plan], Estimate]

PADDED_STATES = frozenset({"gathered", "buckets"})
"""Row states whose size includes FSDP's dim-0 padding to the shard group (gathered
units, reduce-scatter inputs): what can shrink when DP does (see :func:`slack`)."""


def padded_bytes(rows: Iterable[Row]) -> int:
    """The high bytes of the rows of :data:`PADDED_STATES`: an upper bound on the FSDP
    padding among them."""
    return sum(r.high for r in rows if r.state in PADDED_STATES)


def stage_padded(st: StageEstimate) -> int:
    """:func:`padded_bytes` of one stage's rows, without building them where it can: a
    row of :data:`PADDED_STATES` is one of the stage's shared rows (the gathered units,
    bucket and reduce-scatter inputs, dequantized copies that
    :func:`engine.ledger.stage_rows.shared_rows` lists, which are cached: the estimate
    summed them) — but for torchtitan's head unit gathered again inside its loss rows
    (``hbm.gathered.head_regather``, an activation row), so a torchtitan plan's rows are
    read whole. The low bound's padded bytes are its shared rows' only
    (:class:`engine.layout.proofs.stage_bounds.StageLow`: its activation rows do not change
    with DP). The ledger's estimates only (its stages know their plan; a caller's
    estimator's rows are read); ``test_heaviest_padded`` compares the two."""
    if (
        st.source is None
        or st.built_rows is not None
        # torchtitan's head units are gathered inside its loss rows, not the shared rows
        or st.source.runtime.activation_profile == "torchtitan"
    ):
        return padded_bytes(st.rows)
    shared = shared_rows(st.source, st.stage)
    return padded_bytes(shared.head) + padded_bytes(shared.tail)


def lowest_stage(est: Estimate) -> StageEstimate:
    """The stage whose fit peak's low is the estimate's (the largest low of any stage,
    :func:`engine.estimate.fit_range`; the first of ties)."""
    low = est.fit_peak.low
    return next(st for st in est.stages if st.fit_peak.low == low)


@dataclass(frozen=True, slots=True)
class Outcome:
    """A layout's estimated HBM peak per rank (heaviest stage), or why it failed."""

    layout: Layout
    low: int
    high: int
    limit: int
    capacity: int
    error: str | None = None
    node_problems: tuple[str, ...] = ()  # host RAM / NVMe per node that does not fit
    padded: int = 0  # bytes of the heaviest stage's rows sized with FSDP padding
    # the same of the stage whose fit low is the estimate's (:func:`lowest_stage`): the
    # low figure's slack (:func:`slack`) is that stage's padding
    padded_low: int = 0

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def fits_high(self) -> bool:
        """The high estimate is within the limit (usable HBM less headroom) and the
        node ledgers fit."""
        return self.ok and self.high <= self.limit and not self.node_problems

    @property
    def fits_low(self) -> bool:
        """Even the optimistic estimate is within the limit (node ledgers fitting)."""
        return self.ok and self.low <= self.limit and not self.node_problems

    @property
    def headroom(self) -> int:
        """Bytes left under the limit at the high estimate (negative: over)."""
        return self.limit - self.high


def slack(plan: Plan, outcome: Outcome, figure: str = "high") -> int:
    """An upper bound on how much a rank's peak by ``figure`` ("high" or "low") can
    exceed that at a smaller DP of the same regime: only the padding FSDP adds to its
    gathered units and reduce-scatter inputs can shrink away with fewer ranks (sharded
    states only grow). It is at most the padded rows of the stage that figure is of —
    the heaviest stage's (``Outcome.padded``) for the high figure, which is the largest
    high of any stage's phases, and the stage of the largest low for the low figure
    (``Outcome.padded_low``), which is the largest low of any stage's phases: each such
    largest never falls with fewer ranks by more than its stage's padding — times the
    largest padding share of any unit at that layout; 0 when parameters are not
    gathered."""
    padded = outcome.padded if figure == "high" else outcome.padded_low
    return padded_slack(plan, outcome.layout, padded)


def padded_slack(plan: Plan, layout: Layout, padded_rows: int) -> int:
    """:func:`slack` at ``layout`` of ``padded_rows`` bytes of padded rows (an upper
    bound on them gives an upper bound on the slack): the padding they can lose, and
    the allocator reserve's share of it — the fit peak adds the reserve, a share of the
    allocated peak (``int(peak × factor)``, so at most one byte more for the rounding),
    which falls with it."""
    pad, padded = share_in(padding_context(plan), layout)
    if not pad:
        return 0
    lost = -(-padded_rows * pad // padded)
    return lost + math.ceil(lost * share_bound(reserve_factors(plan))) + 2


def _decisive_estimate(plan: Plan) -> Estimate:
    """The search needs only the verdict's inputs: skip stages that cannot be heaviest."""
    return estimate(plan, decisive_only=True)


@lru_cache(maxsize=1)
def _ledger_outcomes(plan: Plan) -> dict[Layout, Outcome]:
    """The ledger's outcomes of one plan's layouts, kept across searches: the estimate is
    pure, and the GUI, the report and the CLI search the same plan again. Each search
    still counts the estimates it needed (:attr:`Evaluator.calls`), wherever the
    outcome came from, so its effort reads the same whatever ran before."""
    return {}


class Evaluator:
    """Memoised estimates of one plan under different layouts, with the floors the
    search asks first (the ledger's estimate only)."""

    def __init__(self, plan: Plan, estimator: Estimator | None = None) -> None:
        self.plan = plan
        self._estimate: Estimator = estimator or _decisive_estimate
        self._cache: dict[Layout, Outcome] = {}
        self.calls = 0
        self.peeks = 0  # reads by :meth:`peek` of layouts not asked for (not counted)
        self._ledger = estimator is None
        # lower bounds on the peak (proofs.bound): the ledger's only, like fewest_ranks
        self.floors = peak_floors(plan) if self._ledger else None

    @property
    def fewest_ranks(self) -> int:
        """The world size below which no layout can fit (:mod:`engine.layout.proofs.bound`);
        1 under a caller's estimator, whose rows the floor knows nothing of."""
        return fewest_ranks(self.plan) if self._ledger else 1

    def __call__(self, layout: Layout) -> Outcome:
        got = self._cache.get(layout)
        if got is None:
            self.calls += 1
            got = self._cache[layout] = self._known(layout)
        return got

    def peek(self, layout: Layout) -> Outcome:
        """``layout``'s outcome without asking for it: neither counted (:attr:`calls`)
        nor kept among :attr:`outcomes`, which stay the layouts the searches asked for (a
        count that finds nothing names the closest of them). The cross-EP rule
        (:mod:`engine.layout.proofs.cross_ep`) reads a wider layout the search may never ask
        for, or may refuse by a preference; the ledger's outcome is kept all the same
        (:func:`_ledger_outcomes`), so a search that asks for it later pays nothing."""
        got = self._cache.get(layout)
        if got is not None:
            return got
        self.peeks += 1
        return self._known(layout)

    def _known(self, layout: Layout) -> Outcome:
        """The outcome from the ledger's outcomes kept across searches, estimated where
        none is (a caller's estimator is asked every time: it may not be pure)."""
        if not self._ledger:
            return self._outcome(layout)
        known = _ledger_outcomes(self.plan)
        got = known.get(layout)
        if got is None:
            got = known[layout] = self._outcome(layout)
        return got

    def _outcome(self, layout: Layout) -> Outcome:
        plan = with_layout(self.plan, layout)
        try:
            est = self._estimate(plan)
        except PlanError as exc:
            return Outcome(
                layout, 0, 0, plan.hbm_limit_bytes, plan.hardware.capacity_bytes, error=str(exc)
            )
        low = lowest_stage(est)
        return Outcome(
            layout,
            est.fit_peak.low,
            est.fit_peak.high,
            est.limit_bytes,
            est.capacity_bytes,
            node_problems=tuple(est.nodes.problems()),
            # a caller's estimator is a black box: its rows are all there is to read
            padded=stage_padded(est.heaviest) if self._ledger else padded_bytes(est.heaviest.rows),
            padded_low=stage_padded(low) if self._ledger else padded_bytes(low.rows),
        )

    @property
    def outcomes(self) -> list[Outcome]:
        return list(self._cache.values())


Clock = Callable[[], float]


class BudgetSpent(Exception):
    """The search's time budget ran out before the next estimate."""


@dataclass
class Budget:
    """A wall-clock budget for one search (``seconds`` None: unbounded)."""

    seconds: float | None
    clock: Clock = time.monotonic
    started: float = field(default=0.0)
    spent: bool = False

    def __post_init__(self) -> None:
        self.started = self.clock()

    def elapsed(self) -> float:
        return self.clock() - self.started

    def check(self) -> None:
        if self.seconds is not None and self.elapsed() > self.seconds:
            self.spent = True
            raise BudgetSpent
