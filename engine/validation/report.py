"""Reconciliation as text (CLI, PDF report) and as JSON (``--json``).

Kept apart from the arithmetic in ``reconcile.py`` so every view formats the same
numbers; bytes are shown in GB and GiB side by side like the rest of MemPlan.
"""

from __future__ import annotations

from typing import Any

from engine.units import UnitChoice, fmt_bytes, fmt_range
from engine.validation.reconcile import Figure, RankResult, Reconciliation
from engine.validation.records import MeasuredRecord


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:+.1f} %"


def _figure_line(f: Figure, units: UnitChoice, width: int = 12) -> str:
    measured = "—" if f.measured is None else fmt_bytes(f.measured, units)
    estimate = "—" if f.low is None or f.high is None else fmt_range(f.low, f.high, units)
    error = _pct(f.error_percent)
    return f"    {f.name:<{width}} {measured:>26}   {estimate:>34}   {error:>8}  {f.verdict}"


SIMULATED = "simulated (trace)"
"""How every view names a trace record: a simulated measurement, not a GPU run."""


def kind_words(record: MeasuredRecord) -> str:
    """``simulated (trace)`` for a trace record, ``GPU run`` otherwise."""
    return SIMULATED if record.simulated else "GPU run"


def rank_lines(result: RankResult, units: UnitChoice = "both") -> list[str]:
    """The lines of one rank: its figures, then its categories when it has a breakdown."""
    rec = result.record
    head = f"{rec.title} (stage {result.stage}): {result.verdict}"
    if rec.simulated:
        torch_version = rec.versions.get("torch")
        head += f" — {SIMULATED}" + (f", torch {torch_version}" if torch_version else "")
    elif rec.device and rec.device.name:
        head += f" — {rec.device.name}"
    measured = "traced" if rec.simulated else "measured"
    header = f"    {'figure':<12} {measured:>26}   {'estimate low–high':>34}   {'error':>8}"
    lines = [head, header + "  verdict"]
    lines += [_figure_line(f, units) for f in result.figures]
    if result.categories:
        lines.append("    by category at the estimate's peak moment:")
        width = max(12, *(len(f.name) for f in result.categories))
        lines += [_figure_line(f, units, width) for f in result.categories]
    return lines


def render(rec: Reconciliation, units: UnitChoice = "both") -> str:
    """The reconciliation as a plain-text table: warnings first, so they are seen."""
    inside = sum(1 for r in rec.ranks if r.verdict == "inside")
    traces = sum(1 for r in rec.ranks if r.record.simulated)
    kinds = f" ({traces} {SIMULATED})" if traces else ""
    lines = [
        f"Estimate vs measured — plan config {rec.config_hash[:12]}, {len(rec.ranks)} "
        f"record(s){kinds}, {inside} inside the range (error = measured − estimate mid)"
    ]
    lines += [f"WARNING: {w}" for w in rec.warnings]
    lines += [f"note: {n}" for n in rec.notes]
    for result in rec.ranks:
        lines.append("")
        lines += rank_lines(result, units)
    return "\n".join(lines)


def _figure_json(f: Figure) -> dict[str, Any]:
    return {
        "name": f.name,
        "measured_bytes": f.measured,
        "low_bytes": f.low,
        "high_bytes": f.high,
        "error_bytes": f.error_bytes,
        "error_percent": f.error_percent,
        "verdict": f.verdict,
    }


def reconciliation_json(rec: Reconciliation) -> dict[str, Any]:
    """A JSON object: per rank its figures and categories, plus warnings and notes."""
    return {
        "config_hash": rec.config_hash,
        "warnings": list(rec.warnings),
        "notes": list(rec.notes),
        "all_inside": rec.all_inside,
        "ranks": [
            {
                "label": r.record.label,
                "kind": r.record.kind,
                "simulated": r.record.simulated,
                "hostname": r.record.hostname,
                "rank": r.record.rank,
                "record_config_hash": r.record.config_hash,
                "stage": r.stage,
                "verdict": r.verdict,
                "figures": [_figure_json(f) for f in r.figures],
                "categories": [_figure_json(f) for f in r.categories],
                "warnings": list(r.warnings),
            }
            for r in rec.ranks
        ],
    }
