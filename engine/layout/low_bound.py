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
one of the decisive stages, so the bound is the smallest stage's.

It costs nearly an estimate for MoE models (the shared rows are most of one; an
estimate of the same layout then reuses them), so the search asks for it only where it
replaces an estimate one for one (:meth:`engine.layout.search._Shape.probe`): at a
regime's probe it proves what a failing estimate would — over the limit by more than the
slack, whose padded bytes it bounds from above (:meth:`LowFloors.with_padded`), every
smaller DP of the regime fails too. ``tests/engine/layout/test_low_bound.py`` checks the
padded bound against the estimate's and that rule against brute force.
"""

from __future__ import annotations

from engine.errors import PlanError
from engine.layout.bound import PeakFloors
from engine.layout.evaluate import padded_bytes
from engine.layout.lattice import with_layout
from engine.layout.point import Layout
from engine.ledger.peaks.runtime import reserve_row
from engine.ledger.phases import add_sums, timeline_of
from engine.ledger.row import PHASES, Phase
from engine.ledger.stage_rows import shared_rows
from engine.legality.checks import check
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
        got = self.floors.canonical(layout)
        if got is None:
            return 0, 0
        try:
            laid = resolved(with_layout(self.plan, layout))
            check(laid)
            stages = [(st, shared_rows(laid, st.stage)) for st in got[1]]
        except (PlanError, NotImplementedError, ValueError):
            return 0, 0
        padded = max(padded_bytes((*sh.head, *sh.tail)) for _, sh in stages)
        best: int | None = None
        for st, sh in stages:
            phases = timeline_of(add_sums(sh.sums, st.activation_sums)).phases
            busy = max(phases[ph].high for ph in PHASES if ph not in QUIET)
            low = min(phases[ph].low for ph in PHASES if ph not in QUIET or phases[ph].high >= busy)
            fit = low + reserve_row(laid, low, low).low + sh.inside[0]
            best = fit if best is None else min(best, fit)
        return (best, padded) if best else (0, 0)
