"""A sound lower bound on a layout's high fit peak without an estimate.

A DeepSeek-V3 layout search meets ~1,700 shapes (TP × PP × CP × EP) and most of them
fail by the same margin at every DP: a stage's saved activations come near the HBM
limit on their own (TP 4 without CP saves 124 GB per rank for DeepSeek-V3's 61 layers at
4,096 tokens). The bound, per stage that can be the heaviest
(:func:`engine.estimate.decisive_stages`), adds up what no DP or EP can take away:

- the activation rows that need no placed tensors (:func:`activation_rows` given none:
  the autocast weight copies count no weights, the all-to-all row is absent, every
  other row is the estimate's own). They depend on TP, CP, the stage's layers, the
  micro-batch and the micro-batches in flight, not on DP (``engine/ledger/activations``
  does not read it), and on EP in one term only: a MoE layer's backward working set
  holds the unsharded gradients of its local experts, ⌈experts ÷ EP⌉ of them
  (``working.moe_working_terms``), which only falls as EP grows. So they are computed
  once per (TP, PP, CP, expert TP, split, micro-batch, accumulation), at DP 1 and the
  widest EP (one expert per rank), a lower bound at every EP — not at EP 1, where
  Llama-4-Maverick's 128 experts put 17 GB in the working set that EP 64 does not
  (0.3 GB): a floor taken there exceeded the estimate;
- the weights and optimizer state, live at every moment: the w ÷ pp ranks of a stage
  hold at least the stage's one-rank states between them
  (:func:`engine.layout.floor.resident_states`), and every rank of a stage has the same
  activation rows, so the estimated (heaviest) rank holds the activations plus that
  share — which only shrinks as DP grows;
- the allocator reserve, a fixed share of the peak phase's high (:func:`reserve_row`);
- the CUDA context and cuBLAS workspace (when inside the capacity) and one NCCL
  communicator per TP, CP and pipeline-neighbour group, which every DP and EP keeps.

Why each is a lower bound: a phase's high is the largest sum of the rows live at one of
its moments (:func:`engine.ledger.phases.timeline`), which only grows with more rows;
the fit peak is the peak phase's high plus its reserve plus the runtime rows inside the
capacity; each stage's fit peak is at most the heaviest stage's. The hypothesis test
``tests/engine/layout/test_bound.py`` checks the bound against the estimate on random
plans and layouts, and the search's answers stay those of brute force
(``test_search_exact.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from engine.errors import PlanError
from engine.estimate import decisive_stages
from engine.layout.floor import resident_states
from engine.layout.lattice import with_layout
from engine.layout.point import Layout
from engine.ledger.activations.rows import activation_rows
from engine.ledger.groups import stage_groups
from engine.ledger.peaks.runtime import outside_capacity, reserve_row, runtime_rows
from engine.ledger.phases import Sums, moment_sums, timeline_of
from engine.ledger.placement import stage_layer_ranges
from engine.legality import rules
from engine.plan import Plan
from engine.stacks.defaults import resolved

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
    runtime_low: int = 0  # the same runtime rows' low


def _canonical(layout: Layout, widest_ep: int) -> Layout:
    """The layout the DP- and EP-free parts are computed at: DP 1 and the widest EP."""
    return replace(layout, dp=1, ep=widest_ep)


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


def _stage_floors(plan: Plan, laid: Plan) -> tuple[StageFloor, ...]:
    """The DP- and EP-free parts of each decisive stage of ``laid`` (canonical)."""
    par = laid.parallelism
    ranges = stage_layer_ranges(laid.model.architecture, par)
    resident = resident_states(plan, par.pp, par.pp_layer_split)
    accumulating = laid.batch.grad_accum > 1
    out = []
    for s in decisive_stages(laid):
        rows = activation_rows(laid, s, len(ranges[s]), ())
        sums = moment_sums(rows, accumulating)
        act = max(span.high for span in timeline_of(sums).phases.values())
        runtime_low, runtime_high = _runtime(laid, s)
        out.append(StageFloor(s, act, resident[s], runtime_high, sums, runtime_low))
    return tuple(out)


class PeakFloors:
    """Lower bounds on layouts' high fit peaks (see the module's docstring), the DP- and
    EP-free parts memoised per canonical layout."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.widest_ep = max(rules.ep_values(plan.model.architecture))
        self._cache: dict[Layout, tuple[Plan, tuple[StageFloor, ...]] | None] = {}
        self._values: dict[Layout, int] = {}  # a search asks for a layout's floor often
        self.calls = 0

    def canonical(self, layout: Layout) -> tuple[Plan, tuple[StageFloor, ...]] | None:
        """The canonical (DP 1, widest EP) plan of ``layout`` and its decisive stages'
        DP- and EP-free parts; None when it cannot be laid out."""
        key = _canonical(layout, self.widest_ep)
        if key not in self._cache:
            self.calls += 1
            try:
                laid = resolved(with_layout(self.plan, key))
                self._cache[key] = (laid, _stage_floors(self.plan, laid))
            except (PlanError, NotImplementedError, ValueError):
                self._cache[key] = None
        return self._cache[key]

    def __call__(self, layout: Layout) -> int:
        """A lower bound on ``layout``'s high fit peak, non-increasing in DP with the
        batch held; 0 when none is known (the layout cannot be laid out: its estimate
        says why)."""
        value = self._values.get(layout)
        if value is None:
            value = self._values[layout] = self._floor(layout)
        return value

    def _floor(self, layout: Layout) -> int:
        got = self.canonical(layout)
        if got is None:
            return 0
        laid, stages = got
        per_stage_ranks = layout.world_size // layout.pp
        best = 0
        for st in stages:
            held = st.activations + -(-st.resident // per_stage_ranks)
            best = max(best, held + reserve_row(laid, 0, held).high + st.runtime)
        return best


@lru_cache(maxsize=1)
def peak_floors(plan: Plan) -> PeakFloors:
    """The plan's :class:`PeakFloors`, kept across searches: ``gpu_counts`` is pure and
    the GUI, the report and the CLI call it with the same plan, whose floors (and the
    bounds built on them, :mod:`engine.layout.regimes`) are then worked out once. The
    last plan's only: keeping four made the next plans' searches slower (a bench of six
    presets in one process, ~15 %), for no gain but on returning to an older plan."""
    return PeakFloors(plan)
