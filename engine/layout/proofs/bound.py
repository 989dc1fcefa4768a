"""Sound lower bounds on the GPU count and on a layout's fit peaks, without an estimate.

**The rank floor** (:func:`fewest_ranks`). Every byte of the weights, gradients and
optimizer state lives in some rank's HBM when nothing is offloaded, and sharding only
divides tensors (rounding each shard up) while TP, EP, PP and replication only add
copies: summed over the ranks of any layout, the persistent states are at least what one
rank holds when the plan runs on one GPU. So some rank of a ``w``-rank layout holds at
least that total ÷ ``w``; over the HBM limit, no layout of ``w`` ranks fits by either
estimate (``test_floor.py::test_no_layout_holds_less_than_the_floor_share``).

**The peak floor** (:class:`PeakFloors`). Most shapes (TP × PP × CP × EP) of a large
model fail by the same margin at every DP: a stage's saved activations come near the
limit on their own (``test_deepseek_v3_tp4_without_cp_is_over_the_limit_by_activations``).
Per stage that can be the heaviest (:func:`engine.estimate.decisive_stages`) it adds up
what no DP or EP can take away:

- the activation rows that need no placed tensors
  (:func:`~engine.ledger.activations.rows.activation_rows` given none: the autocast
  weight copies count no weights, the all-to-all row is absent, every other row is the
  estimate's own). They read TP, CP, the stage's layers, the micro-batch and the
  micro-batches in flight, not DP, and EP in one term only: a MoE layer's backward
  working set holds the unsharded gradients of ⌈experts ÷ EP⌉ local experts
  (``working.moe_working_terms``), which only falls as EP grows. So they are computed
  once per (TP, PP, CP, expert TP, split, micro-batch, accumulation), at DP 1 and the
  widest EP — not at EP 1, where a floor would exceed the estimate
  (``test_floor_counts_the_moe_working_set_at_the_widest_ep``);
- the weights and optimizer state, live at every moment: the w ÷ pp ranks of a stage
  hold at least the stage's one-rank states between them (:func:`resident_states`) and
  share its activation rows, so the heaviest rank holds the activations plus that share,
  which only shrinks as DP grows;
- the allocator reserve on those (:func:`~engine.ledger.peaks.runtime.stuck_bytes`);
- the CUDA context and cuBLAS workspace (when inside the capacity) and one NCCL
  communicator per TP, CP and pipeline-neighbour group, which every DP and EP keeps.

A phase's high is the largest sum of the rows live at one of its moments
(:func:`engine.ledger.phases.timeline`), which only grows with more rows, and the fit
peak adds the reserve and the runtime inside the capacity. The low floor is the same
sum by the low figure (the activations' largest low of any moment, the resident share,
the reserve's and the kept runtime's low): a stage's low fit peak is at least it
(:func:`engine.ledger.phases.peak_phase_of`), and the job's is the largest of any
stage's (:func:`engine.estimate.fit_range`). A row added to or changed in the
activations, the states or the runtime must keep both floors at most the estimate
(``test_bound.py::test_floor_at_most_the_estimate`` and ``..._on_presets``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from engine.allocator.reserve import ReserveModel
from engine.errors import PlanError
from engine.estimate import decisive_stages
from engine.layout.point import Layout
from engine.layout.shapes import with_layout
from engine.ledger.activations.geometry import geometry
from engine.ledger.activations.rows import fixed_at, varying_parts
from engine.ledger.activations.schedule import in_flight
from engine.ledger.activations.stage_layers import stage_layers
from engine.ledger.groups import stage_groups
from engine.ledger.peaks.runtime import (
    outside_capacity,
    reserve_factors,
    runtime_rows,
    stuck_bytes,
)
from engine.ledger.phases import Sums, live_positions
from engine.ledger.placement import stage_layer_ranges
from engine.ledger.row import MOMENTS, NO_MOMENTS
from engine.ledger.states.persistent import all_state_rows
from engine.legality import rules
from engine.plan import Plan
from engine.stacks.defaults import resolved

STATE_GROUPS = frozenset({"weights", "gradients", "optimizer"})
RESIDENT_GROUPS = frozenset({"weights", "optimizer"})


def _one_gpu(plan: Plan, pp: int = 1, split: tuple[int, ...] | None = None) -> Plan:
    """The plan on one rank (no TP, PP, CP, EP or DP; no explicit split), or on one
    rank per stage of a ``pp``-stage pipeline split as ``split``."""
    par = plan.parallelism.model_copy(
        update={
            "tp": 1,
            "pp": pp,
            "cp": 1,
            "ep": 1,
            "dp": 1,
            "expert_tp": 1,
            "virtual_stages": 1,
            "pp_layer_split": split,
            "pp_layout": None,
            "shard_group_size": None,
        }
    )
    return plan.model_copy(update={"parallelism": par})


def _states(one: Plan, stage: int, groups: frozenset[str]) -> int:
    """Bytes (low) of one rank's persistent HBM rows of ``groups`` on ``stage``."""
    return sum(
        r.low
        for r in all_state_rows(one, stage)
        if r.location == "hbm" and r.kind == "persistent" and r.group in groups
    )


def _offloaded(plan: Plan) -> bool:
    off = plan.offload
    return off.params != "none" or off.optimizer != "none"


@lru_cache(maxsize=256)
def fewest_ranks(plan: Plan) -> int:
    """The smallest world size whose average share of the model states fits the HBM
    limit (1 when something is offloaded: offload moves states off HBM, so the floor
    would not hold)."""
    if _offloaded(plan):
        return 1
    total = _states(resolved(_one_gpu(plan)), 0, STATE_GROUPS)
    limit = plan.hbm_limit_bytes
    return max(1, -(-total // limit)) if limit > 0 else 1


@lru_cache(maxsize=1024)
def resident_states(plan: Plan, pp: int, split: tuple[int, ...] | None) -> tuple[int, ...]:
    """Per stage of a ``pp``-stage pipeline split as ``split``, the bytes of weights and
    optimizer state one rank holds when each stage runs on one rank — the states live
    at every moment of the step (gradients are not: made in backward, freed after the
    step). The w ÷ pp ranks of a stage in any layout of w ranks hold at least that
    much between them (the floor's argument), so one of them holds its share; all 0
    when something is offloaded."""
    if _offloaded(plan):
        return (0,) * pp
    one = resolved(_one_gpu(plan, pp, split))
    return tuple(_states(one, s, RESIDENT_GROUPS) for s in range(pp))


KEPT_GROUPS = frozenset({"tp", "cp", "pp_prev", "pp_next"})
"""Communicators a rank joins at every DP and EP of its shape (``stage_groups``)."""
FIXED_RUNTIME = frozenset({"cuda_context", "cublas_workspace"})


@dataclass(frozen=True, slots=True)
class StageFloor:
    stage: int
    activations: int  # the activation rows' peak (high)
    resident: int  # one-rank weights + optimizer bytes of the stage
    runtime: int  # CUDA context, cuBLAS, the kept communicators' NCCL buffers (high)
    activation_sums: Sums  # the activation rows' allocated moment sums (low, high)
    runtime_low: int  # the same runtime rows' low
    activation_low: int  # the activation rows' largest low of any moment
    reserve: ReserveModel  # the canonical plan's reserve factors (every layout of it reads them)


def _canonical(layout: Layout, widest_ep: int) -> Layout:
    """The layout the DP- and EP-free parts are computed at: DP 1 and the widest EP
    (``dataclasses.replace`` built directly, as :meth:`Layout.at_dp` is: a search asks
    thousands of times; ``test_at_dp_is_replace`` fails if a field is added)."""
    lay = layout
    return Layout(
        lay.tp, lay.pp, lay.cp, widest_ep, 1, lay.micro_batch, lay.grad_accum, lay.etp, lay.pp_split
    )


def _runtime(plan: Plan, stage: int) -> tuple[int, int]:
    """(low, high) of the runtime rows inside the capacity that every DP and EP keeps."""
    rows = [
        r
        for r in runtime_rows(plan, stage)
        if r.role in FIXED_RUNTIME and not outside_capacity(plan, r)
    ]
    kept = sum(1 for g in stage_groups(plan, stage) if g.kind in KEPT_GROUPS)
    per = plan.runtime.nccl_bytes_per_communicator
    low, high = sum(r.low for r in rows), sum(r.high for r in rows)
    if per is not None and kept:
        low, high = low + kept * per.low, high + kept * per.high
    return low, high


class _Stages:
    """The decisive stages of one canonical plan, each stage's :class:`StageFloor` worked
    out when first asked for: a floor over the limit at one stage is over at the
    heaviest, so :meth:`PeakFloors.over` often needs the first stage's only. Kept by
    index in a dict, each entry set once (``setdefault``): concurrent searches of one
    plan share the floors (:func:`peak_floors`), and at worst work a stage out twice."""

    __slots__ = ("accumulating", "done", "laid", "ranges", "reserve", "resident", "stages")

    def __init__(self, plan: Plan, laid: Plan) -> None:
        par = laid.parallelism
        self.laid = laid
        self.ranges = stage_layer_ranges(laid.model.architecture, par)
        self.resident = resident_states(plan, par.pp, par.pp_layer_split)
        self.accumulating = laid.batch.grad_accum > 1
        self.stages = decisive_stages(laid)
        self.reserve = reserve_factors(laid)  # read by every layout's floor: once here
        self.done: dict[int, StageFloor] = {}

    def floor(self, i: int) -> StageFloor:
        """The ``i``-th decisive stage's parts (the earlier ones worked out first, so an
        error any of them raises comes in the order the eager loop met it)."""
        got = self.done.get(i)
        if got is None:
            for j in range(i + 1):
                if j not in self.done:
                    self.done.setdefault(j, self._work(j))
            got = self.done[i]
        return got

    def all(self) -> tuple[StageFloor, ...]:
        """Every decisive stage's parts, in order."""
        return tuple(self.floor(i) for i in range(len(self.stages)))

    def _work(self, i: int) -> StageFloor:
        s, laid = self.stages[i], self.laid
        sums = activation_sums(laid, s, len(self.ranges[s]), self.accumulating)
        # the peak phase's high: every moment is some phase's, whose high is its largest
        act = max(high for _, high in sums)
        runtime_low, runtime_high = _runtime(laid, s)
        act_low = max(low for low, _ in sums)
        return StageFloor(
            s, act, self.resident[s], runtime_high, sums, runtime_low, act_low, self.reserve
        )


def activation_sums(plan: Plan, stage: int, n_layers: int, accumulating: bool) -> Sums:
    """The allocated moment sums of
    :func:`~engine.ledger.activations.rows.activation_rows` of ``stage`` placing no
    tensors, without building a row: its fixed parts' bytes, and its varying parts'
    (the saved rows', the labels') at the stage's micro-batches in flight, each added
    at its live moments — the numbers the rows are built from, as
    :func:`engine.ledger.stage_rows.stage_numbers` sums them (activation rows are never
    live at accumulated moments only). ``tests/engine/layout/test_bound_numbers.py``
    compares them with the rows' sums."""
    last = stage == plan.parallelism.pp - 1
    sl = stage_layers(plan, stage)
    g = geometry(plan)
    fixed = fixed_at(plan, last, ())(g, sl)
    saved, labels = varying_parts(plan, sl, last, n_layers, ())
    fly = in_flight(plan, stage)
    lows, highs = [0] * len(MOMENTS), [0] * len(MOMENTS)
    spans = [p.span for p in (*fixed.held, *fixed.tail) if p.allocated]
    lives = [p.moments for p in (*fixed.held, *fixed.tail) if p.allocated]
    for p in (*saved, *labels):
        if p.allocated:
            spans.append(p.span(fly))
            lives.append(p.moments)
    for (low, high), moments in zip(spans, lives, strict=True):
        for k in live_positions(moments, NO_MOMENTS, accumulating):
            lows[k] += low
            highs[k] += high
    return tuple(zip(lows, highs, strict=True))


LAYOUT_ERRORS = (PlanError, NotImplementedError, ValueError)
"""What laying a plan out (or building its rows) may raise: no bound is known then; the
estimate says why."""


class PeakFloors:
    """Lower bounds on layouts' high and low fit peaks (see the module's docstring), the
    DP- and EP-free parts memoised per canonical layout, stage by stage."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.widest_ep = max(rules.ep_values(plan.model.architecture))
        self._cache: dict[Layout, tuple[Plan, tuple[StageFloor, ...]] | None] = {}
        self._stages: dict[Layout, _Stages | None] = {}  # the stages worked out so far
        # a search asks for a layout's floor often: per figure, the values known
        self._values: dict[str, dict[Layout, int]] = {"high": {}, "low": {}}
        self.calls = 0

    def canonical(self, layout: Layout) -> tuple[Plan, tuple[StageFloor, ...]] | None:
        """The canonical (DP 1, widest EP) plan of ``layout`` and its decisive stages'
        DP- and EP-free parts; None when it cannot be laid out."""
        key = _canonical(layout, self.widest_ep)
        if key not in self._cache:
            stages = self._started(key)
            got = None
            if stages is not None:
                try:
                    got = (stages.laid, stages.all())
                except LAYOUT_ERRORS:
                    self._stages[key] = None
            self._cache[key] = got
        return self._cache[key]

    def laid(self, layout: Layout) -> Plan | None:
        """The resolved canonical (DP 1, widest EP) plan of ``layout``, which the floor
        lays out anyway (None: it cannot be): what reads neither DP nor which EP above
        one (the EP all-to-all buffers, :mod:`engine.layout.proofs.cross_ep`) is read from it."""
        stages = self._started(_canonical(layout, self.widest_ep))
        return None if stages is None else stages.laid

    def _started(self, key: Layout) -> _Stages | None:
        """The canonical layout's :class:`_Stages` (None: it cannot be laid out)."""
        if key not in self._stages:
            self.calls += 1
            try:
                self._stages[key] = _Stages(self.plan, resolved(with_layout(self.plan, key)))
            except LAYOUT_ERRORS:
                self._stages[key] = None
        return self._stages[key]

    def __call__(self, layout: Layout, figure: str = "high") -> int:
        """A lower bound on ``layout``'s fit peak by ``figure`` ("high" or "low"),
        non-increasing in DP with the batch held; 0 when none is known (the layout
        cannot be laid out: its estimate says why)."""
        values = self._values[figure]
        value = values.get(layout)
        if value is None:
            value = values[layout] = _value(self.canonical(layout), layout, _STAGE[figure])
        return value

    def over(self, layout: Layout, limit: int, figure: str = "high") -> bool:
        """Whether the floor by ``figure`` (:meth:`__call__`) exceeds ``limit``: the floor
        is the largest stage's, so the first stage over decides, and the stages after it
        are not worked out (most shapes the search drops are over at their first stage).

        One difference from ``floors(layout) > limit``: a later stage whose rows cannot
        be worked out makes the whole floor unknown (0, not over), and here it is never
        met. Over is sound all the same: a stage's floor is at most the estimate's figure
        wherever the estimate succeeds (the heaviest stage holds at least as much by the
        high figure, and the low one is the largest of any stage's), and a layout whose
        estimate fails is not accepted either; the smaller DPs of its batch have that
        stage's floor at least as high (it only falls as DP grows)."""
        values = self._values[figure]
        value = values.get(layout)
        if value is not None:
            return value > limit
        stage_floor = _STAGE[figure]
        key = _canonical(layout, self.widest_ep)
        if key not in self._cache:  # not every stage worked out yet: stop at one over
            stages = self._started(key)
            if stages is None:
                return False
            per_stage_ranks = layout.world_size // layout.pp
            for i in range(len(stages.stages)):
                try:
                    st = stages.floor(i)
                except LAYOUT_ERRORS:
                    self._cache[key], self._stages[key] = None, None
                    return False
                if stage_floor(stages.laid, st, per_stage_ranks) > limit:
                    return True
            self._cache[key] = (stages.laid, stages.all())
        value = values[layout] = _value(self._cache[key], layout, stage_floor)
        return value > limit


StageValue = Callable[[Plan, StageFloor, int], int]
"""One stage's floor by one figure, given the canonical plan and the ranks of a stage."""


def _value(
    got: tuple[Plan, tuple[StageFloor, ...]] | None, layout: Layout, stage_floor: StageValue
) -> int:
    """The floor at ``layout`` of its canonical plan and stages ``got`` (0: none)."""
    if got is None:
        return 0
    laid, stages = got
    per_stage_ranks = layout.world_size // layout.pp
    return max([0, *(stage_floor(laid, st, per_stage_ranks) for st in stages)])


def _stage_floor(laid: Plan, st: StageFloor, per_stage_ranks: int) -> int:
    """One stage's high floor: its activations and share of the resident states, the
    allocator reserve on them and the runtime every DP and EP keeps."""
    held = st.activations + -(-st.resident // per_stage_ranks)
    return held + stuck_bytes(st.reserve, 0, held)[1] + st.runtime


def _stage_floor_low(laid: Plan, st: StageFloor, per_stage_ranks: int) -> int:
    """One stage's low floor: the largest low of its canonical activations at any moment
    and its share of the resident states (live at every moment, counted by their low),
    the allocator reserve's low on them and the low of the runtime every DP and EP
    keeps. A stage's low fit peak is the largest low of any of its moments plus the
    reserve's low on it and its runtime rows' low inside the capacity
    (:func:`engine.ledger.phases.peak_phase_of`), each at least these."""
    held = st.activation_low + -(-st.resident // per_stage_ranks)
    return held + stuck_bytes(st.reserve, held, held)[0] + st.runtime_low


_STAGE: dict[str, StageValue] = {"high": _stage_floor, "low": _stage_floor_low}


@lru_cache(maxsize=1)
def peak_floors(plan: Plan) -> PeakFloors:
    """The plan's :class:`PeakFloors`, kept across searches: ``gpu_counts`` is pure and
    the GUI, the report and the CLI call it with the same plan, whose floors (and the
    bounds built on them, :mod:`engine.layout.proofs.regimes`) are then worked out once.
    The last plan's only: more kept plans' floors slow the next plans' searches (measure
    with ``tests/bench_engine.py``), for no gain but on returning to an older plan."""
    return PeakFloors(plan)
