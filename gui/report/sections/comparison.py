"""The comparison appendix (when asked for): the plans side by side, the chart, the
inputs that differ and the ledger rows that differ, with deltas against the first plan.
The same figures and words as ``memplan compare`` and the Compare window."""

from __future__ import annotations

from PySide6.QtCore import QRectF
from PySide6.QtGui import QColor, QPainter

from engine.units import UnitChoice, fmt_range
from engine.whatif.compare import SUMMARY_FIGURES, delta_text, show_input, summary
from gui.report.content import ReportContent
from gui.report.html import CHART_WIDTH, INK, chart, esc, heading, table

ROWS_LISTED = 40
"""Changed rows printed (largest change first); the rest are counted."""
COMPARISON_CHART_HEIGHT = 260


def comparison_section(c: ReportContent) -> str:
    cmp = c.comparison
    if cmp is None:
        return ""
    names = [s.name for s in cmp.sides]
    out = [heading(1, "Appendix — comparison with other plans", "comparison")]
    out.append(
        f'<p class="small">{len(names)} plans; every delta is against the first, '
        f"{esc(names[0])}. This report's plan is config "
        f"{esc(c.est.config_hash[:12])}.</p>"
    )
    sums = [summary(s, c.units) for s in cmp.sides]
    width = max(10, 72 // len(names))
    out.append(
        table(
            ["", *map(esc, names)],
            [[esc(k), *(esc(s[k]) for s in sums)] for k in SUMMARY_FIGURES],
            [28, *([width] * len(names))],
            font_pt=7,
        )
    )
    out.append(chart("comparison", CHART_WIDTH, COMPARISON_CHART_HEIGHT))
    out.append(f"<h2>Inputs that differ: {len(cmp.inputs)}</h2>")
    if cmp.inputs:
        rows = [
            [f'<span class="mono">{esc(d.path)}</span>', *(esc(show_input(v)) for v in d.values)]
            for d in cmp.inputs
        ]
        out.append(table(["Field", *map(esc, names)], rows, font_pt=7))
    else:
        out.append('<p class="muted">None: the plans have the same inputs.</p>')
    changed = cmp.changed_rows
    out.append(f"<h2>Ledger rows that differ: {len(changed)} of {len(cmp.rows)}</h2>")
    u: UnitChoice = "gib" if c.units == "gib" else "gb"
    rows = []
    for r in changed[:ROWS_LISTED]:
        cells = [f"<span class='small mono'>{esc(r.id)}</span>", esc(r.location)]
        cells += ["absent" if v is None else esc(fmt_range(v[0], v[1], u)) for v in r.values]
        cells += [esc(delta_text(r, i, u)) for i in range(1, len(names))]
        rows.append(cells)
    if rows:
        deltas = [f"Δ {esc(n)}" for n in names[1:]]
        out.append(table(["Row", "Where", *map(esc, names), *deltas], rows, font_pt=7))
    if len(changed) > ROWS_LISTED:
        out.append(
            f'<p class="small">{len(changed) - ROWS_LISTED} smaller changes not listed '
            "(<span class='mono'>memplan compare</span> lists every row).</p>"
        )
    return "".join(out)


def draw_comparison_chart(c: ReportContent, painter: QPainter, rect: QRectF) -> None:
    """The compare window's chart. Imported here: its module brings the window's widget
    classes, which a report without a comparison (``memplan report``) never needs."""
    if c.comparison is not None:
        from gui.compare.compare_chart import draw_comparison

        draw_comparison(painter, rect, c.comparison, c.units, QColor(INK))
