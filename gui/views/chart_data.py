"""The numbers behind the stacked ledger chart, free of Qt so they can be tested.

Every bar is a sum of ledger rows grouped by ``Row.group``, stacked by the rows' low
values, with the low–high spread on top. An HBM bar is the figure the fit test compares
(:func:`engine.verdict.fit_parts`): the live rows, the fragmentation the caching allocator
cannot release (:func:`~engine.ledger.peaks.runtime.stuck_bytes`) and the memory outside
PyTorch; the rest of the allocator reserve — cached blocks freed before an out-of-memory —
rides above it as :attr:`Bar.cache`, drawn apart so reserved stays visible. The HBM bars
are the step's phases for the rank that decides fit (the phase timeline); host RAM is
shown as one rank's share and as a whole node; NVMe per node. The node ledgers come from
``Estimate.nodes``, built for the busiest node, the same worst-rank rule the verdict uses.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.estimate import Estimate, StageEstimate
from engine.ledger.peaks.runtime import outside_capacity, stuck_bytes
from engine.ledger.row import PHASES, Phase, Row
from engine.plan import Plan

FRAGMENTATION_GROUP = "fragmentation (not released)"
"""The segment of an HBM bar holding the allocator reserve a free-and-retry cannot give
back: the part of reserved − allocated that counts toward fit."""
CACHE_LABEL = "allocator cache, released before OOM"
"""What the outlined box above an HBM bar is (:attr:`Bar.cache`)."""

GROUP_ORDER: tuple[str, ...] = (
    "weights",
    "gradients",
    "optimizer",
    "activations",
    "logits",
    "inputs",
    "gathered",
    "buckets",
    "temporaries",
    "checkpoint",
    "runtime",
    "allocator",
    FRAGMENTATION_GROUP,
    "offload",
    "offload (pinned)",
    "processes",
)

PHASE_LABELS = {
    "steady": "Steady",
    "forward": "Forward",
    "backward": "Backward",
    "optimizer": "Optimizer",
    "checkpoint": "Checkpoint",
}


@dataclass(frozen=True, slots=True)
class Segment:
    group: str
    low: int
    high: int


@dataclass(frozen=True, slots=True)
class Bar:
    """One stacked bar; ``capacity``/``limit`` are drawn as lines over it when known.
    ``cache`` (low, high) is the allocator's releasable cache over the bar, outside its
    segments: reserved memory the fit test does not count."""

    label: str
    segments: tuple[Segment, ...]
    capacity: int | None = None
    limit: int | None = None
    highlight: bool = False
    cache: tuple[int, int] = (0, 0)

    @property
    def low(self) -> int:
        return sum(s.low for s in self.segments)

    @property
    def high(self) -> int:
        return sum(s.high for s in self.segments)

    @property
    def reserved_high(self) -> int:
        """The bar's top with the releasable cache over it (what the axis must reach)."""
        return self.high + self.cache[1]


@dataclass(frozen=True, slots=True)
class Panel:
    key: str
    title: str
    bars: tuple[Bar, ...]
    note: str = ""


def group_sort_key(group: str) -> tuple[int, str]:
    return (GROUP_ORDER.index(group) if group in GROUP_ORDER else len(GROUP_ORDER), group)


def stack(rows: list[tuple[Row, float]]) -> tuple[Segment, ...]:
    """Sum (row, factor) pairs by group, in the chart's fixed group order."""
    sums: dict[str, list[int]] = {}
    for row, factor in rows:
        acc = sums.setdefault(row.group, [0, 0])
        acc[0] += round(row.low * factor)
        acc[1] += round(row.high * factor)
    return tuple(
        Segment(g, lo, hi)
        for g, (lo, hi) in sorted(sums.items(), key=lambda kv: group_sort_key(kv[0]))
    )


def fit_rows(plan: Plan, rows: tuple[Row, ...]) -> list[tuple[Row, float]]:
    """The rows a bar stacks, on the basis the verdict compares with capacity: when the
    capacity is what the framework can allocate, the CUDA context is already outside it.
    The allocator reserve row (state ``allocator``) is left out: :func:`fit_bar` splits it."""
    return [(r, 1.0) for r in rows if r.state != "allocator" and not outside_capacity(plan, r)]


def fit_bar(
    plan: Plan, est: Estimate, st: StageEstimate, phase: Phase, label: str, highlight: bool
) -> Bar:
    """One stage's HBM at ``phase`` as the fit test sees it: live rows and memory outside
    PyTorch by group, the reserve that cannot be released as :data:`FRAGMENTATION_GROUP`
    (the same :func:`stuck_bytes` the verdict adds) and the rest of the reserve — blocks
    the allocator frees and retries before an out-of-memory — as the bar's ``cache``."""
    rows = st.phase_rows(phase)
    segments = list(stack(fit_rows(plan, rows)))
    reserve = next((r for r in rows if r.state == "allocator"), None)
    cache = (0, 0)
    if reserve is not None:
        t = st.totals
        alloc = t.phases[phase]
        stuck = stuck_bytes(t.reserve, alloc.low, alloc.high, t.steady)
        if stuck[1] > 0:
            segments.append(Segment(FRAGMENTATION_GROUP, stuck[0], stuck[1]))
        cache = (max(0, reserve.low - stuck[0]), max(0, reserve.high - stuck[1]))
    segments.sort(key=lambda s: group_sort_key(s.group))
    return Bar(label, tuple(segments), est.capacity_bytes, est.limit_bytes, highlight, cache)


def phase_bars(plan: Plan, est: Estimate, stage: StageEstimate | None = None) -> tuple[Bar, ...]:
    """HBM per phase of one stage (the heaviest by default), peak phase highlighted: the
    rows live at each phase's peak moment, the reserve that cannot be released and the
    memory outside the allocator (:func:`fit_bar`)."""
    st = stage or est.heaviest
    return tuple(fit_bar(plan, est, st, ph, PHASE_LABELS[ph], ph == st.peak_phase) for ph in PHASES)


def stage_bars(plan: Plan, est: Estimate) -> tuple[Bar, ...]:
    """HBM at each stage's peak phase; the heaviest stage (which decides fit) marked."""
    return tuple(
        fit_bar(plan, est, st, st.peak_phase, f"Stage {st.stage}", st.stage == est.heaviest_stage)
        for st in est.stages
    )


def _live_at_peak(rows: tuple[Row, ...]) -> list[Row]:
    """The node ledger's rows live in its largest phase (they never all coincide)."""
    best: list[Row] = []
    for ph in PHASES:
        live = [r for r in rows if r.live_in(ph)]
        if sum(r.high for r in live) > sum(r.high for r in best):
            best = live
    return best


def panels(plan: Plan, est: Estimate) -> tuple[Panel, ...]:
    """The chart's panels: HBM phase timeline, host RAM (rank share and node), NVMe."""
    hw, nodes = plan.hardware, est.nodes
    rpn = nodes.view.ranks_per_node
    host_rows = _live_at_peak(nodes.host)
    nvme_rows = _live_at_peak(nodes.nvme)
    host = (
        Bar(
            "Rank share",
            stack([(r, 1.0 / rpn) for r in host_rows]),
            capacity=hw.host_ram_bytes_per_node // rpn,
        ),
        Bar("Node", stack([(r, 1.0) for r in host_rows]), capacity=hw.host_ram_bytes_per_node),
    )
    nvme = (Bar("Node", stack([(r, 1.0) for r in nvme_rows]), capacity=hw.nvme_bytes_per_node),)
    stage_note = f" — stage {est.heaviest_stage}" if len(est.stages) > 1 else ""
    return (
        Panel("hbm", f"HBM per rank by phase{stage_note}", phase_bars(plan, est)),
        Panel(
            "host",
            f"Host RAM ({rpn} ranks/node)",
            host,
            note="" if any(b.high for b in host) else "no host RAM rows",
        ),
        Panel("nvme", "NVMe", nvme, note="" if nvme[0].high else "no NVMe rows"),
    )
