"""A sound lower bound on a layout's LOW fit peak, for the low search.

The high bound (:mod:`engine.layout.bound`) cannot serve the low search: the estimate
takes the low figure of the phase that peaks by the *high* one, and a phase without
activations (the optimizer step's temporaries, say) could be that phase while the
activations' phases have more low bytes. So this bound, per decisive stage
(:func:`engine.estimate.decisive_stages`), sums moment by moment

- the stage's shared rows (states, gathered units, buckets, gradients, optimizer-step
  temporaries, checkpoint event: :func:`engine.ledger.stage_rows.shared_rows`) at the
  layout itself, exactly — a small share of an estimate's work;
- its activation rows at the canonical layout (DP 1, the widest EP), which the real
  ones only add to (:mod:`engine.layout.bound`: the autocast weight copies and the
  all-to-all buffers are what they lack);

and takes, over the phases that can peak by the high figure, the smallest low. At the
*quiet* phases (steady, optimizer, checkpoint) the only activation rows live are those
live throughout (the input batch, rotary buffers), which the canonical rows count
exactly — the rows they lack are live in forward and backward only — so the quiet sums
are exact, and a quiet phase whose high is below an activation phase's lower bound is
not the peak phase; forward and backward always count. Plus the allocator reserve's low on that
low, and the runtime rows inside the capacity (exact). The heaviest stage (by high) is
one of the decisive stages, so the bound is the smallest stage's — of those that can be
the heaviest (:func:`narrowed`). On a pipeline the smallest is often a light stage (the
last, with fewer layers: DeepSeek-V3's search estimated ~150 layouts within its bound
that failed at 1.5–5.5× it). The same sums bound each stage's *high* fit peak from
below (every moment's sums are at most the estimate's: the largest phase high, its
reserve's high, which grows with it, and the runtime rows inside the capacity, exact);
the smallest stage's exact fit peak (:func:`engine.ledger.stage_rows.stage_numbers`,
summed as :func:`engine.estimate.estimate` sums it: no rows are built, and the
estimate of the same layout reuses the parts) either puts its high strictly below
the largest high known (a stage's high bound, or one worked out) — it is not the
heaviest and drops out — or gives its exact low instead of the bound; until the
smallest left is exact, or over the limit by more than the regime's slack can take
back. The padded bytes' bound stays the largest of every decisive stage's.

It costs nearly an estimate for MoE models (the shared rows are most of one; an
estimate of the same layout then reuses them), so the search asks for it only where it
replaces an estimate one for one (:meth:`engine.layout.search._Shape.probe`): at a
regime's probe it proves what a failing estimate would — over the limit by more than the
slack, whose padded bytes it bounds from above (:meth:`LowFloors.with_padded`), every
smaller DP of the regime fails too. ``tests/engine/layout/test_low_bound.py`` checks the
padded bound against the estimate's and that rule against brute force.
"""

from __future__ import annotations

from collections.abc import Callable

from engine.errors import PlanError
from engine.layout.bound import PeakFloors
from engine.layout.evaluate import padded_bytes
from engine.layout.lattice import with_layout
from engine.layout.padding import padding_share
from engine.layout.point import Layout
from engine.ledger.peaks.runtime import reserve_bytes, reserve_row
from engine.ledger.phases import add_sums, peak_phase_of, timeline_of
from engine.ledger.row import PHASES, Phase
from engine.ledger.stage_rows import (
    StageMemo,
    shared_rows,
    stage_memo,
    stage_numbers,
)
from engine.legality.checks import check
from engine.plan import Plan
from engine.stacks.defaults import resolved

QUIET: frozenset[Phase] = frozenset({"steady", "optimizer", "checkpoint"})
"""Phases no activation row is live at: their sums are the shared rows' alone."""


class LowFloors:
    """Lower bounds on layouts' low fit peaks (see the module's docstring), reusing the
    high bound's canonical activation sums."""

    def __init__(self, floors: PeakFloors) -> None:
        self.floors = floors
        self.plan = floors.plan
        self._cache: dict[Layout, tuple[int, int]] = {}
        self.dropped = 0  # stages found not the heaviest (:func:`narrowed`), for the tests

    def __call__(self, layout: Layout) -> int:
        """A lower bound on ``layout``'s low fit peak; 0 when none is known (the layout
        cannot be laid out or is refused: its estimate says why)."""
        return self.with_padded(layout)[0]

    def with_padded(self, layout: Layout) -> tuple[int, int]:
        """(the bound, an upper bound on the padded bytes of the estimate's heaviest
        stage — :attr:`engine.layout.evaluate.Outcome.padded`): the rows of the padded
        states are shared rows, the bound computes every decisive stage's, and the
        heaviest stage is a decisive one, so the largest of theirs is at least its.
        (0, 0) when no bound is known."""
        got = self._cache.get(layout)
        if got is None:
            got = self._cache[layout] = self._bound(layout)
        return got

    def _bound(self, layout: Layout) -> tuple[int, int]:
        got = self.stage_bounds(layout)
        if got is None:
            return 0, 0
        laid, bounds, padded = got
        pad, size = padding_share(self.plan, layout)
        enough = self.plan.hbm_limit_bytes + (-(-padded * pad // size) if pad else 0)
        memo = stage_memo(laid)
        try:
            best, dropped = narrowed(bounds, enough, lambda s: fit_peak(laid, s, memo))
        except (PlanError, NotImplementedError, ValueError):
            return 0, 0
        self.dropped += dropped
        return (best, padded) if best else (0, 0)

    def stage_bounds(self, layout: Layout) -> tuple[Plan, dict[int, tuple[int, int]], int] | None:
        """The laid-out plan, each decisive stage's lower bounds on its own (low, high)
        fit peak (see the module's docstring), and the padded bytes' bound; None when
        the layout cannot be laid out."""
        got = self.floors.canonical(layout)
        if got is None:
            return None
        try:
            laid = resolved(with_layout(self.plan, layout))
            check(laid)
            stages = [(st, shared_rows(laid, st.stage)) for st in got[1]]
        except (PlanError, NotImplementedError, ValueError):
            return None
        padded = max(padded_bytes((*sh.head, *sh.tail)) for _, sh in stages)
        bounds: dict[int, tuple[int, int]] = {}
        for st, sh in stages:
            phases = timeline_of(add_sums(sh.sums, st.activation_sums)).phases
            busy = max(phases[ph].high for ph in PHASES if ph not in QUIET)
            low = min(phases[ph].low for ph in PHASES if ph not in QUIET or phases[ph].high >= busy)
            top = max(span.high for span in phases.values())
            bounds[st.stage] = (
                low + reserve_row(laid, low, low).low + sh.inside[0],
                top + reserve_row(laid, 0, top).high + sh.inside[1],
            )
        return laid, bounds, padded


def narrowed(
    bounds: dict[int, tuple[int, int]], enough: int, exact: Callable[[int], tuple[int, int]]
) -> tuple[int, int]:
    """A lower bound on the heaviest stage's low fit peak, given each decisive stage's
    lower bounds on its (low, high) fit peak, ``bounds``, and ``exact``, a stage's exact
    (low, high) fit peak: the heaviest is the first stage of the largest exact high.

    While the smallest low left is a bound (and not over ``enough``, past which more
    precision proves nothing the search uses), that stage is worked out exactly: its low
    replaces the bound, and every stage worked out whose exact high is strictly below
    the largest high bound or exact high known — a lower bound on the heaviest stage's
    high — is dropped, as not the heaviest. A tie keeps the stage (of equal highs the
    first is the heaviest, which the highs alone do not tell), and the stage setting the
    largest known high is never dropped, so one always remains; the smallest low left is
    the bound. Returned with how many stages were dropped."""
    lows = {s: low for s, (low, _) in bounds.items()}
    heaviest = max(high for _, high in bounds.values())
    highs: dict[int, int] = {}  # the stages worked out: their exact high
    while True:
        stage = min(lows, key=lows.__getitem__)
        if stage in highs or lows[stage] > enough:
            return lows[stage], len(bounds) - len(lows)
        lows[stage], highs[stage] = exact(stage)
        heaviest = max(heaviest, highs[stage])
        for s, high in highs.items():
            if high < heaviest:
                lows.pop(s, None)


def fit_peak(laid: Plan, stage: int, memo: StageMemo | None = None) -> tuple[int, int]:
    """One stage's exact fit peak (low, high) in the resolved, checked plan ``laid``, as
    :func:`engine.estimate.estimate` works it out from the stage's numbers: the peak
    phase's range, its allocator reserve and the runtime rows inside the capacity
    (``memo``: the plan's :func:`~engine.ledger.stage_rows.stage_memo`, if at hand)."""
    numbers = stage_numbers(laid, [stage])[0]
    lows, highs = numbers.sums()
    _, low, high = peak_phase_of(lows, highs)
    r_low, r_high = reserve_bytes((memo or stage_memo(laid)).reserve, low, high)
    fit_low, fit_high = numbers.inside
    return low + r_low + fit_low, high + r_high + fit_high
