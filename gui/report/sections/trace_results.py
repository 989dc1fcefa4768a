"""A trace record in the report: a *simulated measurement*, kept apart from GPU runs.

A trace (``memplan trace``, or Trace this plan in the window) is PyTorch's memory
trackers on fake tensors: an allocated peak with its breakdown, no allocator reserve,
CUDA context or NCCL. The report says so in its heading, prints the traced peak
against the ledger's range, the traced bytes per ledger group and per phase (the
engine's :mod:`engine.trace.compare`, read back from the stored record), the library
versions, the config hash it was traced for — with a warning when that is not this
plan's — and its wall time. Beside the allocated peak it prints the allocator replay's
reserved peak and fragmentation (``engine/trace/reserved.py``, kept in the record) against
the ledger's reserved range. The newest trace is also drawn (:func:`draw_trace_chart`).
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QRectF
from PySide6.QtGui import QColor, QPainter

from engine.trace.compare import Comparison, Line, compare
from engine.trace.record import latest_trace, result_from_record, stored_replay
from engine.trace.text import differences, stale_warning
from engine.units import fmt_bytes
from engine.validation.reconcile import RankResult
from engine.validation.records import RecordError
from gui.report.content import ReportContent
from gui.report.html import CHART_WIDTH, INK, chart, esc, kv_table, size, table
from gui.views.trace_paint import draw_trace

KIND = "simulated measurement (trace)"
"""How the report names a trace record (``validate-run`` says "simulated (trace)")."""
TRACE_CHART_HEIGHT = 230
"""Height of the trace chart slot (96-dpi px): eight groups and four phases legible."""

ERROR_SIGN = (
    "Error = ledger mid − traced, in % of traced (as memplan trace prints it: positive "
    "when the ledger is high)."
)
NOT_MEASURED = (
    "A trace has no allocator, no CUDA context or NCCL buffers and no device total: its "
    "reserved figure is the allocator replay's simulation of the traced requests, and "
    "the memory outside PyTorch is not measured."
)


def _verdict(line: Line) -> str:
    if line.split_apart:  # a classification difference, judged in the sum's row
        return f"split apart: see {line.judged_in}"
    if line.inside is None:
        return "no ledger row"
    if line.inside:
        return "inside"
    return "above" if line.traced > (line.high or 0) else "below"


def line_row(line: Line) -> list[str]:
    ledger = "—" if line.low is None or line.high is None else f"{line.low:,}–{line.high:,}"
    err = line.error_percent
    pct = "—" if err is None else f"{err:+.1f} %"
    if line.split_apart and err is not None:
        pct = f"({err:+.1f} %)"  # not an error: the sum's row is
    return [esc(line.name), f"{line.traced:,}", ledger, pct, _verdict(line)]


def _lines_table(first: str, lines: tuple[Line, ...]) -> str:
    return table(
        [first, "Traced (B)", "Ledger low–high (B)", "Error", "Verdict"],
        [line_row(line) for line in lines],
        [20, 19, 34, 12, 15],
        numeric={1, 2, 3},
    )


def trace_comparison(c: ReportContent, r: RankResult) -> Comparison | None:
    """The record's trace against this report's estimate (None when unreadable)."""
    try:
        return compare(result_from_record(r.record), c.est)
    except RecordError:
        return None


VERSION_KEYS: tuple[str, ...] = ("torch", "transformers", "peft", "python")


def _facts(c: ReportContent, r: RankResult) -> list[tuple[str, str]]:
    """The trace's key facts: peak, ledger range, config hash, versions, wall time."""
    rec, u, peak = r.record, c.units, r.figure("allocated")
    traced = peak.measured or 0
    extra = rec.extra
    where = (
        f" in {esc(extra['peak_phase'])} ({esc(extra.get('peak_moment', ''))})"
        if extra.get("peak_phase")
        else ""
    )
    ledger = "—"
    if peak.low is not None and peak.high is not None:
        ledger = f"{size(peak.low, peak.high, u)} — {peak.low:,}–{peak.high:,} B"
        ledger += f": <b>{esc(peak.verdict)}</b>"
    plan_hash = c.est.config_hash
    traced_for = f"<span class='mono'>{esc((rec.config_hash or 'none')[:16])}</span>"
    traced_for += (
        " (this plan)"
        if rec.config_hash == plan_hash
        else f" — this plan is <span class='mono'>{esc(plan_hash[:16])}</span>"
    )
    versions = " · ".join(f"{k} {rec.versions[k]}" for k in VERSION_KEYS if rec.versions.get(k))
    raw = extra.get("setup")
    setup: dict[str, Any] = raw if isinstance(raw, dict) else {}
    steps = rec.window.steps_seen
    return [
        ("Traced peak (allocated)", f"{esc(fmt_bytes(traced, u))} — {traced:,} B{where}"),
        ("Ledger range (allocated)", ledger),
        *_reserved_facts(c, r),
        ("Traced for config", traced_for),
        ("Versions", esc(versions)),
        ("Wall time", esc(f"{rec.window.seconds or 0:.1f} s, {steps} steps (the last reported)")),
        (
            "Traced layout",
            esc(
                f"{setup.get('strategy', '?')}, rank {rec.rank} of {rec.world_size}, "
                f"{setup.get('tracker', '?')}"
            ),
        ),
    ]


def _reserved_facts(c: ReportContent, r: RankResult) -> list[tuple[str, str]]:
    """The replay's reserved peak and fragmentation beside the ledger's reserved range."""
    replayed = stored_replay(r.record)
    u = c.units
    if replayed is None:
        return [("Replay (reserved)", "not in this record (traced before the replay)")]
    x = replayed.result
    res = c.est.heaviest.reserved_peak
    where = "inside" if res.low <= x.peak_reserved <= res.high else "outside"
    share = 100 * x.fragmentation_share
    over = 100 * replayed.over_allocated / x.peak_allocated if x.peak_allocated else 0.0
    return [
        (
            "Replay peak reserved",
            f"{esc(fmt_bytes(x.peak_reserved, u))} — {x.peak_reserved:,} B "
            f"(replay allocated {x.peak_allocated:,} B), in {esc(x.peak_phase)}",
        ),
        (
            "Replay reserved − allocated",
            f"{esc(fmt_bytes(replayed.over_allocated, u))} ({over:.1f} % of allocated: the "
            "two peaks, as max_memory_reserved − max_memory_allocated)",
        ),
        (
            "Replay fragmentation",
            f"{esc(fmt_bytes(x.fragmentation, u))} ({share:.1f} % of allocated) when reserved "
            f"last grew, {esc(fmt_bytes(x.unreleasable, u))} not releasable; "
            f"{x.segments:,} segments",
        ),
        ("Ledger range (reserved)", f"{size(res.low, res.high, u)}: replay <b>{where}</b>"),
        (
            "Allocator settings",
            esc(f"PYTORCH_CUDA_ALLOC_CONF={replayed.settings()}; {replayed.streams_text()}"),
        ),
    ]


def trace_block(c: ReportContent, r: RankResult, newest: bool) -> str:
    """One trace record: heading, key facts, where it differs, the two tables."""
    rec, u = r.record, c.units
    out = [f"<h3>{esc(rec.title)} — {KIND}, not a GPU run: {esc(r.verdict)}</h3>"]
    out.append(f'<p class="small">{esc(rec.notes[0] if rec.notes else KIND)}</p>')
    cmp = trace_comparison(c, r)
    plan_hash = c.est.config_hash
    out.append(kv_table(_facts(c, r), 24))
    warning = stale_warning(rec.config_hash, plan_hash)
    if warning:
        out.append(f"<p><b>Warning:</b> {esc(warning.removeprefix('WARNING: '))}</p>")
    if cmp is None:
        out.append(
            "<p class='muted'>The stored trace cannot be read back: its per-group and "
            "per-phase figures are not shown.</p>"
        )
        return "".join(out)
    out.append("<p><b>Where the trace and the ledger differ</b></p><ul>")
    out += [f"<li style='font-size: 7.5pt'>{esc(d)}</li>" for d in differences(cmp, u)]
    out.append("</ul>")
    if newest:
        out.append(chart("trace", CHART_WIDTH, TRACE_CHART_HEIGHT))
    out.append(
        "<p class='small'>At the traced peak, by ledger group (trace categories summed in):</p>"
    )
    out.append(_lines_table("Ledger group", cmp.groups))
    out.append("<p class='small'>Each phase's peak (steady: what stays live after zero_grad):</p>")
    out.append(_lines_table("Phase", cmp.phases))
    out.append(f"<p class='small'>{esc(ERROR_SIGN)} {esc(NOT_MEASURED)}</p>")
    return "".join(out)


def newest_trace_result(c: ReportContent) -> RankResult | None:
    """The rank result of the trace the report draws: the newest for this plan."""
    rec = c.reconciliation
    if rec is None:
        return None
    chosen = latest_trace([r.record for r in rec.ranks], c.est.config_hash)
    return next((r for r in rec.ranks if r.record is chosen), None)


def draw_trace_chart(c: ReportContent, painter: QPainter, rect: QRectF) -> None:
    r = newest_trace_result(c)
    cmp = None if r is None else trace_comparison(c, r)
    if cmp is not None:
        draw_trace(painter, rect, cmp, c.units, QColor(INK))
