"""estimate(plan) → Estimate: the one entry point every view uses.

Pure and fast: it builds the rank's rows for every pipeline stage, sums them per
phase, and decides fit by the heaviest rank of the heaviest stage — never the average.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from engine.errors import PlanError
from engine.layout_check import check_layout
from engine.ledger.persistent import persistent_stage_rows
from engine.ledger.placement import stage_layer_ranges
from engine.ledger.row import LOCATIONS, PHASES, Location, Phase, Row
from engine.node_ledgers import NodeLedgers, node_ledgers
from engine.plan import Plan

Verdict = Literal["fits", "straddles", "does_not_fit"]

NOT_YET_COUNTED: tuple[str, ...] = (
    "this version counts persistent model states only; activations, gathered units, "
    "buckets, temporaries and runtime overheads are not in the ledger yet",
)


@dataclass(frozen=True, slots=True)
class Range:
    low: int
    high: int

    @property
    def mid(self) -> int:
        return (self.low + self.high) // 2


@dataclass(frozen=True, slots=True)
class StageEstimate:
    """One pipeline stage as seen by its heaviest rank."""

    stage: int
    layers: range
    rows: tuple[Row, ...]
    phases: dict[Phase, Range]
    peak_phase: Phase
    peak: Range  # HBM, the largest phase

    def location_total(self, location: Location) -> Range:
        rs = [r for r in self.rows if r.location == location]
        return Range(sum(r.low for r in rs), sum(r.high for r in rs))


@dataclass(frozen=True, slots=True)
class Estimate:
    """Everything the views show, computed from one Plan."""

    config_hash: str
    world_size: int
    stages: tuple[StageEstimate, ...]
    heaviest_stage: int
    capacity_bytes: int
    limit_bytes: int  # capacity less the headroom policy
    verdict: Verdict
    verdict_reason: str
    nodes: NodeLedgers
    notes: tuple[str, ...] = field(default=())

    @property
    def heaviest(self) -> StageEstimate:
        return self.stages[self.heaviest_stage]

    @property
    def rows(self) -> tuple[Row, ...]:
        return self.heaviest.rows

    @property
    def peak(self) -> Range:
        return self.heaviest.peak

    def totals(self) -> dict[Location, Range]:
        return {loc: self.heaviest.location_total(loc) for loc in LOCATIONS}


def _phase_totals(rows: tuple[Row, ...]) -> dict[Phase, Range]:
    out: dict[Phase, Range] = {}
    for ph in PHASES:
        live = [r for r in rows if r.location == "hbm" and r.live_in(ph)]
        out[ph] = Range(sum(r.low for r in live), sum(r.high for r in live))
    return out


def _stage(plan: Plan, stage: int) -> StageEstimate:
    arch, par = plan.model.architecture, plan.parallelism
    rows = tuple(persistent_stage_rows(plan, stage))
    phases = _phase_totals(rows)
    peak_phase = max(PHASES, key=lambda ph: (phases[ph].high, phases[ph].low))
    return StageEstimate(
        stage=stage,
        layers=stage_layer_ranges(arch, par)[stage],
        rows=rows,
        phases=phases,
        peak_phase=peak_phase,
        peak=phases[peak_phase],
    )


def _verdict(peak: Range, limit: int, capacity: int) -> tuple[Verdict, str]:
    if peak.high <= limit:
        return "fits", f"the high estimate {peak.high:,} B is within the limit {limit:,} B"
    if peak.low > capacity:
        return "does_not_fit", (
            f"even the low estimate {peak.low:,} B exceeds the capacity {capacity:,} B"
        )
    if peak.low > limit:
        return "does_not_fit", (
            f"the low estimate {peak.low:,} B exceeds the limit {limit:,} B "
            f"(capacity less headroom)"
        )
    return "straddles", (
        f"the range {peak.low:,}–{peak.high:,} B straddles the limit {limit:,} B: "
        f"measure before buying"
    )


def estimate(plan: Plan) -> Estimate:
    """The per-rank memory estimate of a plan.

    Raises :class:`PlanError` when the plan cannot run as laid out.
    """
    check_layout(plan)
    try:
        stages = tuple(_stage(plan, s) for s in range(plan.parallelism.pp))
    except NotImplementedError as exc:
        raise PlanError(str(exc)) from exc
    heaviest = max(range(len(stages)), key=lambda s: (stages[s].peak.high, -s))
    capacity = plan.hardware.capacity_bytes
    limit = int(capacity * (1 - plan.policy.headroom_percent / 100))
    verdict, reason = _verdict(stages[heaviest].peak, limit, capacity)
    nodes = node_ledgers(plan)
    node_problems = nodes.problems()
    if node_problems:
        verdict = "does_not_fit"
        reason = "; ".join([*node_problems, f"HBM: {reason}"])
    return Estimate(
        config_hash=plan.config_hash(),
        world_size=plan.parallelism.world_size,
        stages=stages,
        heaviest_stage=heaviest,
        capacity_bytes=capacity,
        limit_bytes=limit,
        verdict=verdict,
        verdict_reason=reason,
        nodes=nodes,
        notes=NOT_YET_COUNTED,
    )
