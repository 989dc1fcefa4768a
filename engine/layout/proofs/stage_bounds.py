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

A sound lower bound on a layout's LOW fit peak, for the low search.

The low fit peak is the largest low of any decisive stage (:func:`engine.estimate.
fit_range`), and a stage's is the largest low of any moment of its step plus its
allocator reserve's low and the runtime rows inside the capacity
(:func:`engine.ledger.phases.peak_phase_of`). So each decisive stage
(:func:`engine.estimate.decisive_stages`) alone bounds it from below, moment by moment:

- the stage's shared rows (states, gathered units, buckets, gradients, optimizer-step
  temporaries, checkpoint event: :func:`engine.ledger.stage_rows.shared_rows`) at the
  layout itself, exactly — a small share of an estimate's work;
- its activation rows at the canonical layout (DP 1, the widest EP), which the real
  ones only add to (:mod:`engine.layout.proofs.bound`: the autocast weight copies and the
  all-to-all buffers are what they lack);

the largest low of those sums, its reserve's low and the runtime rows inside the
capacity (exact) are at most the stage's own low fit peak, and so at most the layout's.
One stage over the limit proves the layout fails; the stages are worked out one at a
time, the likeliest to settle it first, and no further than a verdict needs.

Why the search may apply it to a whole regime (:meth:`engine.layout.minimum._Shape.
probe`): within a regime every row only grows as DP falls, but for the FSDP padding of
the stage's own gathered units and reduce-scatter inputs
(:func:`engine.layout.proofs.evaluate.padded_slack` of the padded rows among the bound's
shared rows, :attr:`StageLow.padded`): so a stage whose
bound is over the limit by more than that slack is over it at every smaller DP of the
regime, and so is the layout's low fit peak there. The bound's activation rows are the
canonical layout's, the same at every DP of the shape, so they lose nothing as DP
falls: an activation row of a padded state (torchtitan's head unit gathered again
inside the loss rows, ``hbm.gathered.head_regather``, whole on every rank; at a shard
group of one its world-1 reduce copies, ``hbm.buckets.head_reduce_world_one``, built only
with placed tensors) is in the
estimate's padded rows (:func:`engine.layout.proofs.evaluate.stage_padded`) but never in
the bound, and its slack need not cover it
(``test_low_bound.py::test_stage_bounds_fall_by_at_most_their_slack`` checks this step
of the proof itself, stage by stage, over every regime). It costs nearly an estimate for MoE
models (the shared rows are most of one; an estimate of the same layout then reuses
them), so the search asks for it only where it replaces an estimate one for one.
A new shared or activation row must keep it below the low estimate:
``tests/engine/layout/test_low_bound.py::test_low_bound_at_most_the_low_estimate`` and
``test_regime_wide_low_bound_proves_only_failures`` check the bound against the
estimates and the regime rule against brute force.
"""

from __future__ import annotations

from typing import Literal

from engine.layout.point import Layout
from engine.layout.proofs.bound import LAYOUT_ERRORS, PeakFloors, StageFloor
from engine.layout.proofs.evaluate import padded_bytes, padded_slack
from engine.layout.shapes import with_layout
from engine.ledger.peaks.runtime import reserve_factors, stuck_bytes
from engine.ledger.phases import add_sums, moment_sums, timeline_of
from engine.ledger.stage_rows import shared_rows
from engine.ledger.states.persistent import persistent_stage_rows
from engine.legality.checks import check
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
            except LAYOUT_ERRORS:
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
            except LAYOUT_ERRORS:
                self._laid[layout] = None
        return self._laid[layout]


Verdict = Literal["dead", "over", "under", "unknown"]
"""What the bound proves of a layout (:meth:`LowFloors.judge`)."""


class StageLow:
    """One decisive stage's lower bound on its low fit peak, and the bytes of the padded
    rows among its shared rows (what the regime rule's slack is of: all the bound can
    lose as DP falls; at most the estimate's :func:`~engine.layout.proofs.evaluate.
    stage_padded`, which also counts activation rows of a padded state)."""

    __slots__ = ("bound", "padded")

    def __init__(self, bound: int, padded: int) -> None:
        self.bound = bound
        self.padded = padded


class _Layout:
    """What the bound has worked out of one layout: the laid-out plan, its decisive
    stages' canonical parts in the order they are tried, and the stages' bounds so far."""

    __slots__ = ("done", "laid", "order")

    def __init__(self, laid: Plan, order: list[StageFloor]) -> None:
        self.laid = laid
        self.order = order
        self.done: list[StageLow] = []


class LowFloors:
    """Lower bounds on layouts' low fit peaks (see the module's docstring), reusing the
    high bound's canonical activation sums."""

    def __init__(self, floors: PeakFloors) -> None:
        self.floors = floors
        self.plan = floors.plan
        self._layouts: dict[Layout, _Layout | None] = {}
        self.stages_worked = 0  # stages whose shared rows a bound read (the tests count them)

    def __call__(self, layout: Layout) -> int:
        """A lower bound on ``layout``'s low fit peak (every decisive stage's); 0 when
        none is known (the layout cannot be laid out or is refused: its estimate says
        why)."""
        lows = self.stage_lows(layout)
        return 0 if lows is None else max(low.bound for low in lows.values())

    def stage_lows(self, layout: Layout) -> dict[int, StageLow] | None:
        """Every decisive stage's :class:`StageLow` by stage; None when the layout cannot
        be laid out or a stage's rows cannot be built."""
        got = self._started(layout)
        if got is None:
            return None
        out = {}
        for i, st in enumerate(got.order):
            low = self._stage(got, i)
            if low is None:
                return None
            out[st.stage] = low
        return out

    def judge(self, layout: Layout, regime: bool, limit: int | None = None) -> Verdict:
        """What the bound proves of ``layout`` against ``limit`` (default: the plan's):
        ``"dead"``, a stage over the limit — and
        with ``regime`` (smaller DPs of its regime to prove) over by more than its
        padding slack, so every smaller DP of the regime fails too; ``"over"``, over the
        limit, but by no stage's more than its slack (the layout fails; only its
        estimate may prove the smaller DPs failing); ``"under"``, every stage within the
        limit; ``"unknown"``, no bound known. Stages are worked out in turn and no
        further than that verdict needs."""
        got = self._started(layout)
        if got is None:
            return "unknown"
        limit = self.plan.hbm_limit_bytes if limit is None else limit
        over = False
        for i in range(len(got.order)):
            st = self._stage(got, i)
            if st is None:
                return "unknown"
            excess = st.bound - limit
            if excess <= 0:
                continue
            if not regime or excess > padded_slack(self.plan, layout, st.padded):
                return "dead"
            over = True
        return "over" if over else "under"

    def exceeds(self, layout: Layout, limit: int) -> bool:
        """Whether some decisive stage's bound on ``layout``'s low fit peak exceeds
        ``limit`` (:meth:`judge` without a regime to prove)."""
        return self.judge(layout, False, limit) == "dead"

    def _started(self, layout: Layout) -> _Layout | None:
        if layout in self._layouts:
            return self._layouts[layout]
        got: _Layout | None = None
        canonical = self.floors.canonical(layout)
        if canonical is not None:
            try:
                laid = resolved(with_layout(self.plan, layout))
                check(laid)
            except LAYOUT_ERRORS:
                laid = None
            if laid is not None:
                # the stage holding the most that no DP or EP takes away first: the
                # likeliest to be over the limit on its own
                order = sorted(canonical[1], key=lambda s: s.activations + s.resident)
                got = _Layout(laid, order[::-1])
        self._layouts[layout] = got
        return got

    def _stage(self, got: _Layout, i: int) -> StageLow | None:
        """The ``i``-th stage's bound of ``got`` (worked out in order, kept); None when
        its shared rows cannot be built (the estimate says why)."""
        if i < len(got.done):
            return got.done[i]
        st, laid = got.order[i], got.laid
        try:
            sh = shared_rows(laid, st.stage)
        except LAYOUT_ERRORS:
            return None
        self.stages_worked += 1
        low = max(lo for lo, _ in add_sums(sh.sums, st.activation_sums))
        reserve = stuck_bytes(reserve_factors(laid), low, low)[0]
        out = StageLow(low + reserve + sh.inside[0], padded_bytes((*sh.head, *sh.tail)))
        got.done.append(out)
        return out
