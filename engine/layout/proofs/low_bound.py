"""A sound lower bound on a layout's LOW fit peak, for the low search.

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

Why the search may apply it to a whole regime (:meth:`engine.layout.search.minimum._Shape.
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

from engine.errors import PlanError
from engine.layout.lattice.point import Layout
from engine.layout.lattice.shapes import with_layout
from engine.layout.proofs.bound import PeakFloors, StageFloor
from engine.layout.proofs.evaluate import padded_bytes, padded_slack
from engine.ledger.peaks.runtime import reserve_factors, stuck_bytes
from engine.ledger.phases import add_sums
from engine.ledger.stage_rows import shared_rows
from engine.legality.checks import check
from engine.plan import Plan
from engine.stacks.defaults import resolved

Verdict = Literal["dead", "over", "under", "unknown"]
"""What the bound proves of a layout (:meth:`LowFloors.judge`)."""

_ERRORS = (PlanError, NotImplementedError, ValueError)


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
            except _ERRORS:
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
        except _ERRORS:
            return None
        self.stages_worked += 1
        low = max(lo for lo, _ in add_sums(sh.sums, st.activation_sums))
        reserve = stuck_bytes(reserve_factors(laid), low, low)[0]
        out = StageLow(low + reserve + sh.inside[0], padded_bytes((*sh.head, *sh.tail)))
        got.done.append(out)
        return out
