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
from typing import TYPE_CHECKING

from engine import FORMULA_VERSION, __version__
from engine.analysis import FitLimits, analysis
from engine.errors import PlanError
from engine.estimate import Estimate
from engine.exports import EXPORTERS, Export
from engine.layout import GpuCounts
from engine.layout.levers import LeverSummary
from engine.plan import Plan
from engine.planfile import SCHEMA_VERSION, PlanFile
from engine.stacks.catalog import concrete_stack
from engine.stacks.families import family_of
from engine.units import UnitChoice
from engine.whatif.compare import Comparison
from engine.whatif.diagnostics import Diagnosis
from engine.whatif.sensitivity import Bar
from gui.report.html import without_bidi_controls

if TYPE_CHECKING:  # imported where a report has measured runs or a sweep (most have neither)
    from engine.validation import Reconciliation
    from engine.whatif.sweep import Sweep


def appendix_formats(plan: Plan) -> tuple[str, ...]:
    """The framework config the plan's own stack reads — the only one the appendix
    prints (a DeepSpeed plan's report carried a torchtitan recipe, an HF-Trainer FSDP2
    plan a ZeRO-3 ds_config and no accelerate config): DeepSpeed → ds_config.json,
    torchtitan → its recipe, Megatron-Core → its arguments, the HF Trainer → accelerate's
    config (a ZeRO strategy: ds_config.json, which accelerate points at); a plain PyTorch
    script reads none."""
    par, kind = plan.parallelism, plan.method.kind
    stack = concrete_stack(plan.stack.name, par.strategy, kind)
    if stack == "hf_trainer":
        return ("deepspeed",) if family_of(par.strategy) == "deepspeed" else ("accelerate",)
    return {"deepspeed": ("deepspeed",), "torchtitan": ("torchtitan",)}.get(
        stack, ("megatron",) if stack == "megatron_core" else ()
    )


WIDE_RANGE_PERCENT = 2.0
"""Default of the report input ``wide_percent`` (``memplan report --wide-range``): a row's
range is *wide* when its high minus its low is at least this share of its location's
peak (HBM per rank, host RAM or NVMe per node, checkpoint storage of the job) — wide
enough to move the verdict, so the exception list names it. 2 % of an 80 GB rank is
1.6 GB: the size of one allocator-reserve or activation-band swing worth measuring."""


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
    formula_version: int = FORMULA_VERSION
    comparison: Comparison | None = None  # the comparison appendix, when asked for
    sweep: Sweep | None = None  # the sweep section, when asked for
    wide_percent: float = WIDE_RANGE_PERCENT
    levers: tuple[LeverSummary, ...] | None = None  # the fit levers; None: left out

    @property
    def plan_name(self) -> str:
        return without_bidi_controls(self.pf.name) or "Untitled plan"


def _reconciliation(pf: PlanFile, est: Estimate) -> tuple[Reconciliation | None, str | None]:
    if not pf.measurements:
        return None, None
    from engine.validation import RecordError, reconcile, records_of
    from engine.validation.identity import workload_hash

    try:
        records = records_of(pf)
    except RecordError as exc:
        return None, f"the stored measurements cannot be read: {exc}"
    return reconcile(est, records, workload_hash(pf.plan)), None


def gather(
    pf: PlanFile,
    units: UnitChoice = "both",
    now: datetime | None = None,
    comparison: Comparison | None = None,
    sweep: Sweep | None = None,
    wide_percent: float = WIDE_RANGE_PERCENT,
    levers: bool = True,
) -> ReportContent:
    """Compute everything the report shows. Raises :class:`PlanError` when the plan
    itself cannot be estimated (a report of nothing would mislead).

    ``comparison`` and ``sweep`` (computed by the caller: the window has them already)
    add their sections; one of another plan is left out, with a note, since the report
    would print it as this plan's. ``levers`` False leaves the fit levers out (five more
    searches; the window has them already, the command line may skip them)."""
    plan = pf.plan
    a = analysis(plan)
    est = a.estimate
    problems: list[str] = []
    rec, why = _reconciliation(pf, est)
    if why:
        problems.append(why)
    exports: list[Export] = []
    for fmt in appendix_formats(plan):
        try:
            exports.append(EXPORTERS[fmt](plan))
        except (PlanError, ValueError) as exc:  # an exporter that cannot say it, says why
            problems.append(f"{fmt} export: {exc}")
    key = plan.config_hash()
    if comparison is not None and key not in comparison.hashes:
        problems.append("the comparison: none of its plans is this plan")
        comparison = None
    if sweep is not None and sweep.base_hash != key:
        problems.append("the sweep: it was computed for another plan")
        sweep = None
    summaries: tuple[LeverSummary, ...] | None = None
    if levers:
        try:
            summaries = a.lever_summaries
        except PlanError as exc:
            problems.append(f"the fit levers: {exc}")
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
        comparison=comparison,
        sweep=sweep,
        wide_percent=wide_percent,
        levers=summaries,
    )
