"""The sweep section (when asked for): peak HBM per rank against one input, with the
capacity, the limit and the fit boundary, and every value's figures or reason."""

from __future__ import annotations

from PySide6.QtCore import QRectF
from PySide6.QtGui import QColor, QPainter

from engine.estimate import VERDICT_WORDS
from engine.whatif.sweep import show_value
from gui.report.content import ReportContent
from gui.report.html import CHART_WIDTH, INK, chart, esc, heading, size, table
from gui.views.sweep_paint import draw_sweep

SWEEP_CHART_HEIGHT = 300


def sweep_section(c: ReportContent) -> str:
    s = c.sweep
    if s is None:
        return ""
    out = [heading(1, f"Sweep — peak HBM against {s.path}", "sweep")]
    out.append(
        f"<p>{esc(s.path)} over {esc(s.text or str(len(s.points)) + ' values')}, the rest of "
        f"the plan as it is (the plan's own value: {esc(show_value(s.base_value))}). "
        f"<b>Fit boundary: {esc(s.summary())}.</b></p>"
    )
    if s.cancelled:
        out.append(f'<p class="small">Cancelled after {len(s.points)} of {s.requested} values.</p>')
    out.append(chart("sweep", CHART_WIDTH, SWEEP_CHART_HEIGHT))
    b = s.boundary
    rows = []
    for i, p in enumerate(s.points):
        value = esc(show_value(p.value)) + (" ▲" if p.value == s.base_value else "")
        if b is not None and b.index == i:
            value = f"<b>{value} ◀ {esc(b.kind)} that fits</b>"
        if not p.ok:
            rows.append([value, "—", "—", "invalid", f'<span class="small">{esc(p.reason)}</span>'])
            continue
        rows.append(
            [
                value,
                size(p.low or 0, p.high or 0, c.units),
                size(p.limit or 0, p.limit or 0, c.units),
                esc(VERDICT_WORDS[p.verdict or "fits"]),
                f'<span class="small">{esc(p.reason)}</span>',
            ]
        )
    out.append(
        table(
            ["Value", "Peak HBM per rank (low–high)", "Limit", "Verdict", "Why"],
            rows,
            [16, 26, 16, 13, 29],
        )
    )
    return "".join(out)


def draw_sweep_chart(c: ReportContent, painter: QPainter, rect: QRectF) -> None:
    if c.sweep is not None:
        draw_sweep(painter, rect, c.sweep, c.units, QColor(INK))
