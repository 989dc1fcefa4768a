"""Lower bounds on a layout's fit peaks that count its own persistent states exactly.

The peak floor (:mod:`engine.layout.proofs.bound`) spreads a stage's one-rank states over every
rank of the stage, which is what no layout can beat but far below what most layouts
hold: under FSDP2 with EP, a rank keeps its experts sharded over the expert DP group
only, and DDP keeps every state whole. MoE searches would then estimate many layouts
that fail by their states alone (``test_mixtral_8x22b_states_alone_exceed_the_limit``).
This bound, per decisive stage
(:func:`engine.estimate.decisive_stages`), adds moment by moment

- the layout's own persistent HBM state rows (weights, master copies, gradients and
  optimizer state that stay in HBM: :func:`engine.ledger.states.persistent.
  persistent_stage_rows`, the rows the estimate itself counts), and
- the canonical activation rows of :mod:`engine.layout.proofs.bound` (DP 1 and the widest
  EP: a subset of the layout's own, each at most its real size),

so every moment's sums are at most the estimate's. The high fit peak is the largest
phase high plus its reserve plus the runtime rows inside the capacity, so it is at least
the largest phase high of these sums plus the same reserve and the runtime every DP and
EP keeps; the low fit peak is the largest low of any phase of any stage
(:func:`engine.estimate.fit_range`), so it is at least the largest phase low here plus
its reserve and kept runtime. The heaviest stage is a decisive one, and every stage's
low counts: both bounds are the largest stage's, and one stage over the limit proves
either figure over.

Why the search may apply it to a whole regime: persistent states only shrink as DP grows
within a regime (shards over a larger group, :mod:`engine.layout.proofs.regimes`; their padding
too, ``ceil(rows / N)``), and the canonical activations depend on the batch only; so the
bound at a batch's largest DP of a regime is at most the bound at each smaller DP with
that batch. A new persistent state row must keep this argument (shrinks with DP within a
regime): ``tests/engine/layout/test_state_bound.py::test_state_bound_at_most_the_estimate``
and ``test_state_bound_falls_with_dp_within_a_regime`` check the bound against both
estimates and its fall with DP; ``test_search_exact.py`` checks the search's answers
against brute force.
"""

from __future__ import annotations

from engine.errors import PlanError
from engine.layout.lattice.point import Layout
from engine.layout.lattice.shapes import with_layout
from engine.layout.proofs.bound import PeakFloors, StageFloor
from engine.ledger.peaks.runtime import reserve_factors, stuck_bytes
from engine.ledger.phases import add_sums, moment_sums, timeline_of
from engine.ledger.states.persistent import persistent_stage_rows
from engine.plan import Plan
from engine.stacks.defaults import resolved


class StateFloors:
    """Lower bounds on layouts' fit peaks (see the module's docstring), each stage's
    computed once per layout and only as far as a verdict needs; the canonical parts are
    the peak floor's."""

    def __init__(self, floors: PeakFloors) -> None:
        self.floors = floors
        self.plan = floors.plan
        self._laid: dict[Layout, Plan | None] = {}
        self._stages: dict[tuple[Layout, int], tuple[int, int]] = {}

    def __call__(self, layout: Layout) -> tuple[int, int]:
        """Lower bounds on ``layout``'s (low, high) fit peak; (0, 0) when none is known
        (the layout cannot be laid out: its estimate says why)."""
        stages = self._canonical_stages(layout)
        if not stages:
            return 0, 0
        spans = [self._stage(layout, st) for st in stages]
        if any(span is None for span in spans):
            return 0, 0
        return max(s[0] for s in spans if s), max(s[1] for s in spans if s)

    def over(self, layout: Layout, figure: str, limit: int) -> bool:
        """Whether the bound on ``figure`` ("low" or "high") exceeds ``limit``: one stage
        over the limit proves it (the heaviest stage holds at least as much at worst,
        and the low figure is the largest of any stage's); stages are computed in the
        order likeliest to settle it, and no further."""
        stages = sorted(
            self._canonical_stages(layout),
            key=lambda st: st.activations + st.resident,
            reverse=True,
        )
        at = 0 if figure == "low" else 1
        for st in stages:
            span = self._stage(layout, st)
            if span is None:
                return False
            if span[at] > limit:
                return True
        return False

    def _canonical_stages(self, layout: Layout) -> tuple[StageFloor, ...]:
        got = self.floors.canonical(layout)
        return () if got is None else got[1]

    def _stage(self, layout: Layout, st: StageFloor) -> tuple[int, int] | None:
        """(low, high) bound of one decisive stage; None when the layout cannot be laid
        out."""
        key = (layout, st.stage)
        if key not in self._stages:
            laid = self._laid_out(layout)
            if laid is None:
                return None
            try:
                rows = persistent_stage_rows(laid, st.stage)
            except (PlanError, NotImplementedError, ValueError):
                self._laid[layout] = None
                return None
            held = moment_sums(rows, laid.batch.grad_accum > 1)
            phases = timeline_of(add_sums(held, st.activation_sums)).phases.values()
            at_low = max(span.low for span in phases)
            at_high = max(span.high for span in phases)
            factors = reserve_factors(laid)  # reserve_row's figures, without its row
            self._stages[key] = (
                at_low + stuck_bytes(factors, at_low, at_low)[0] + st.runtime_low,
                at_high + stuck_bytes(factors, 0, at_high)[1] + st.runtime,
            )
        return self._stages[key]

    def _laid_out(self, layout: Layout) -> Plan | None:
        if layout not in self._laid:
            try:
                self._laid[layout] = resolved(with_layout(self.plan, layout))
            except (PlanError, NotImplementedError, ValueError):
                self._laid[layout] = None
        return self._laid[layout]
