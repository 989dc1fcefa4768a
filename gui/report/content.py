"""Everything a report shows, computed once from one plan file (no Qt here).

The report is a view like the window: it takes the plan's analysis from
``engine.analysis`` (estimate, GPU counts, diagnostics, sensitivity, what fits the
layout: the very objects the window showed, computed once), adds the exports and the
reconciliation of stored measurements, and formats them; it never computes a byte of
its own. Gathering them in one frozen object
keeps the HTML builders pure functions of it, and lets tests compare the printed
figures with exactly the objects the report was built from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from engine import __version__
from engine.analysis import FitLimits, analysis
from engine.errors import PlanError
from engine.estimate import Estimate
from engine.exports import EXPORTERS, Export
from engine.layout import GpuCounts
from engine.planfile import SCHEMA_VERSION, PlanFile
from engine.units import UnitChoice
from engine.validation import Reconciliation, RecordError, reconcile, records_of
from engine.validation.identity import workload_hash
from engine.whatif.diagnostics import Diagnosis
from engine.whatif.sensitivity import Bar
from gui.report.html import without_bidi_controls

APPENDIX_FORMATS: tuple[str, ...] = ("deepspeed", "fsdp2")
"""The framework configs printed in the appendix (the issue asks for these two)."""


@dataclass(frozen=True)
class ReportContent:
    """A plan file and every engine result the report prints from it."""

    pf: PlanFile
    est: Estimate
    counts: GpuCounts
    diagnosis: Diagnosis
    tornado: tuple[Bar, ...]
    fit: FitLimits
    exports: tuple[Export, ...]
    reconciliation: Reconciliation | None
    units: UnitChoice
    generated: str
    app_version: str = __version__
    schema_version: int = SCHEMA_VERSION
    problems: tuple[str, ...] = field(default=())  # parts that could not be computed

    @property
    def plan_name(self) -> str:
        return without_bidi_controls(self.pf.name) or "Untitled plan"


def _reconciliation(pf: PlanFile, est: Estimate) -> tuple[Reconciliation | None, str | None]:
    if not pf.measurements:
        return None, None
    try:
        records = records_of(pf)
    except RecordError as exc:
        return None, f"the stored measurements cannot be read: {exc}"
    return reconcile(est, records, workload_hash(pf.plan)), None


def gather(pf: PlanFile, units: UnitChoice = "both", now: datetime | None = None) -> ReportContent:
    """Compute everything the report shows. Raises :class:`PlanError` when the plan
    itself cannot be estimated (a report of nothing would mislead)."""
    plan = pf.plan
    a = analysis(plan)
    est = a.estimate
    problems: list[str] = []
    rec, why = _reconciliation(pf, est)
    if why:
        problems.append(why)
    exports: list[Export] = []
    for fmt in APPENDIX_FORMATS:
        try:
            exports.append(EXPORTERS[fmt](plan))
        except (PlanError, ValueError) as exc:  # an exporter that cannot say it, says why
            problems.append(f"{fmt} export: {exc}")
    stamp = (now or datetime.now(UTC)).replace(microsecond=0)
    return ReportContent(
        pf=pf,
        est=est,
        counts=a.counts,
        diagnosis=a.diagnosis,
        tornado=a.sensitivity,
        fit=a.fit,
        exports=tuple(exports),
        reconciliation=rec,
        units=units,
        generated=stamp.isoformat(),
        problems=tuple(problems),
    )
