"""The numbers behind the stacked ledger chart, free of Qt so they can be tested.

Every bar is a sum of ledger rows grouped by ``Row.group``, stacked by the rows' low
values, with the low–high spread on top. The HBM bars are the step's phases for the
rank that decides fit (the phase timeline); host RAM is shown as one rank's share and
as a whole node; NVMe per node. Per-node bars assume every rank on the node carries
what the heaviest rank carries, the same worst-rank rule the verdict uses.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.estimate import Estimate, StageEstimate
from engine.ledger.row import PHASES, Row
from engine.plan import Plan

GROUP_ORDER: tuple[str, ...] = (
    "weights", "gradients", "optimizer", "activations", "gathered", "buckets",
    "temporaries", "runtime", "allocator", "offload", "checkpoint",
)

PHASE_LABELS = {"steady": "Steady", "forward": "Forward", "backward": "Backward",
                "optimizer": "Optimizer", "checkpoint": "Checkpoint"}


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
    return tuple(Segment(g, lo, hi) for g, (lo, hi) in sorted(
        sums.items(), key=lambda kv: group_sort_key(kv[0])))


def ranks_per_node(plan: Plan) -> int:
    """Ranks sharing one node: the plan's placement, never more than the job has."""
    par = plan.parallelism
    per_node = par.ranks_per_node or plan.hardware.gpus_per_node
    return max(1, min(per_node, par.world_size))


def phase_bars(est: Estimate, stage: StageEstimate | None = None) -> tuple[Bar, ...]:
    """HBM per phase of one stage (the heaviest by default), peak phase highlighted."""
    st = stage or est.heaviest
    hbm = [r for r in st.rows if r.location == "hbm"]
    return tuple(
        Bar(
            label=PHASE_LABELS[ph],
            segments=stack([(r, 1.0) for r in hbm if r.live_in(ph)]),
            capacity=est.capacity_bytes,
            limit=est.limit_bytes,
            highlight=ph == st.peak_phase,
        )
        for ph in PHASES
    )


def stage_bars(est: Estimate) -> tuple[Bar, ...]:
    """HBM at each stage's peak phase; the heaviest stage (which decides fit) marked."""
    return tuple(
        Bar(
            label=f"Stage {st.stage}",
            segments=stack([(r, 1.0) for r in st.rows
                            if r.location == "hbm" and r.live_in(st.peak_phase)]),
            capacity=est.capacity_bytes,
            limit=est.limit_bytes,
            highlight=st.stage == est.heaviest_stage,
        )
        for st in est.stages
    )


def _node_rows(rows: tuple[Row, ...], location: str, rpn: int, per_node: bool
               ) -> list[tuple[Row, float]]:
    out = []
    for r in rows:
        if r.location != location or r.scope == "job":
            continue
        if r.scope == "rank":
            out.append((r, float(rpn) if per_node else 1.0))
        else:  # node-scoped rows are shared by the node's ranks
            out.append((r, 1.0 if per_node else 1.0 / rpn))
    return out


def panels(plan: Plan, est: Estimate) -> tuple[Panel, ...]:
    """The chart's panels: HBM phase timeline, host RAM, NVMe."""
    rows, hw = est.rows, plan.hardware
    rpn = ranks_per_node(plan)
    host_cap = hw.host_ram_bytes_per_node
    host = (
        Bar("Rank share", stack(_node_rows(rows, "host", rpn, False)),
            capacity=host_cap // rpn),
        Bar("Node", stack(_node_rows(rows, "host", rpn, True)),
            capacity=host_cap),
    )
    nvme = (Bar("Node", stack(_node_rows(rows, "nvme", rpn, True)),
                capacity=hw.nvme_bytes_per_node),)
    stage_note = f" — stage {est.heaviest_stage}" if len(est.stages) > 1 else ""
    return (
        Panel("hbm", f"HBM per rank by phase{stage_note}", phase_bars(est)),
        Panel("host", f"Host RAM ({rpn} ranks/node)", host,
              note="" if any(b.high for b in host) else "no host RAM rows"),
        Panel("nvme", "NVMe", nvme, note="" if nvme[0].high else "no NVMe rows"),
    )
