"""What to change: the rows that dominate the peak, one-change suggestions re-estimated by
the engine, and the sensitivity of the peak to each uncertain input (tornado)."""

from __future__ import annotations

from engine.units import fmt_bytes, fmt_gb
from gui.report.content import ReportContent
from gui.report.html import CHART_WIDTH, chart, esc, heading, table
from gui.report.inputs import show


def diagnostics_section(c: ReportContent) -> str:
    d = c.diagnosis
    out = [heading(1, "Diagnostics and sensitivity", "diagnostics")]
    out.append(
        f"<p>Peak (high) {esc(fmt_bytes(d.peak_high))} against the limit "
        f"{esc(fmt_bytes(d.limit))}.</p>"
    )
    out.append("<h2>Rows that dominate the peak</h2>")
    out.append(
        table(
            ["Row", "High", "Share of peak"],
            [
                [
                    f"{esc(x.row.label)}<br><span class='small mono'>{esc(x.row.id)}</span>",
                    esc(fmt_bytes(x.row.high)),
                    f"{100 * x.share:.1f} %",
                ]
                for x in d.dominant
            ],
            [56, 28, 16],
            numeric={2},
        )
    )
    out.append("<h2>Suggestions — one change each, re-estimated</h2>")
    if d.suggestions:
        rows = [
            [
                esc(s.label),
                f"{s.saves:,} B<br>{esc(fmt_gb(s.saves or 0))}",
                esc(fmt_bytes(s.peak_high or 0)),
                "fits" if s.fits else "does not fit",
            ]
            for s in d.suggestions
        ]
        out.append(
            table(
                ["Change", "Saves (peak high)", "New peak (high)", "Then"],
                rows,
                [40, 22, 26, 12],
                numeric={1},
            )
        )
    else:
        out.append('<p class="muted">No single change lowers the peak.</p>')
    if d.not_applicable:
        out.append("<h3>Changes that do not help or cannot be estimated</h3>")
        out.append(
            table(
                ["Change", "Why"],
                [[esc(s.label), esc(s.error or "")] for s in d.not_applicable],
                [40, 60],
                font_pt=7,
            )
        )
    out.append("<h2>Sensitivity (tornado data)</h2>")
    out.append(
        '<p class="small">The plan re-estimated at each end of one uncertain input; '
        "the peak is the high fit peak per rank. Widest swing first.</p>"
    )
    if any(b.swing for b in c.tornado):
        out.append(chart("tornado", CHART_WIDTH, 26 * len(c.tornado) + 40))
    rows = []
    for b in c.tornado:
        if b.error:
            rows.append(
                [
                    esc(b.label),
                    esc(show(b.input, b.low_value)),
                    esc(show(b.input, b.high_value)),
                    "—",
                    "—",
                    esc(b.error),
                ]
            )
            continue
        rows.append(
            [
                esc(b.label),
                esc(show(b.input, b.low_value)),
                esc(show(b.input, b.high_value)),
                esc(fmt_gb(b.peak_at_low or 0)),
                esc(fmt_gb(b.peak_at_high or 0)),
                esc(fmt_gb(b.swing)),
            ]
        )
    out.append(
        table(
            ["Input", "Low end", "High end", "Peak at low", "Peak at high", "Swing"],
            rows,
            [24, 15, 15, 15, 15, 16],
            numeric={3, 4, 5},
        )
    )
    return "".join(out)
