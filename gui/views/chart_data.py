"""The numbers behind the stacked ledger chart, free of Qt so they can be tested.

Every bar is a sum of ledger rows grouped by ``Row.group``, stacked by the rows' low
values, with the low–high spread on top. The HBM bars are the step's phases for the
rank that decides fit (the phase timeline); host RAM is shown as one rank's share and
as a whole node; NVMe per node. The node ledgers come from ``Estimate.nodes``, built for
the busiest node, the same worst-rank rule the verdict uses.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.estimate import Estimate, StageEstimate
from engine.ledger.peaks.runtime import outside_capacity
from engine.ledger.row import PHASES, Row
from engine.plan import Plan

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
    """One stacked bar; ``capacity``/``limit`` are drawn as lines over it when known."""

    label: str
    segments: tuple[Segment, ...]
    capacity: int | None = None
    limit: int | None = None
    highlight: bool = False

    @property
    def low(self) -> int:
        return sum(s.low for s in self.segments)

    @property
    def high(self) -> int:
        return sum(s.high for s in self.segments)


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
    capacity is what the framework can allocate, the CUDA context is already outside it."""
    return [(r, 1.0) for r in rows if not outside_capacity(plan, r)]


def phase_bars(plan: Plan, est: Estimate, stage: StageEstimate | None = None) -> tuple[Bar, ...]:
    """HBM per phase of one stage (the heaviest by default), peak phase highlighted: the
    rows live at each phase's peak moment, its allocator reserve and the memory outside
    the allocator (``StageEstimate.phase_rows``)."""
    st = stage or est.heaviest
    return tuple(
        Bar(
            label=PHASE_LABELS[ph],
            segments=stack(fit_rows(plan, st.phase_rows(ph))),
            capacity=est.capacity_bytes,
            limit=est.limit_bytes,
            highlight=ph == st.peak_phase,
        )
        for ph in PHASES
    )


def stage_bars(plan: Plan, est: Estimate) -> tuple[Bar, ...]:
    """HBM at each stage's peak phase; the heaviest stage (which decides fit) marked."""
    return tuple(
        Bar(
            label=f"Stage {st.stage}",
            segments=stack(fit_rows(plan, st.phase_rows(st.peak_phase))),
            capacity=est.capacity_bytes,
            limit=est.limit_bytes,
            highlight=st.stage == est.heaviest_stage,
        )
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
