"""The ledger chart drawn with a bare ``QPainter``: the PDF report's vector chart.

The same panels as the window's pyqtgraph chart (:mod:`gui.views.chart_data`), with
the same bars, colours, labels and capacity notes (:mod:`gui.views.chart_scale`,
:mod:`gui.views.chart_common`), drawn onto any painter — a ``QPicture`` recording in
the report. Writing a report this way imports neither pyqtgraph nor numpy and builds
no widgets, so it runs on any thread.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QFontMetricsF, QPainter, QPen

from engine.estimate import Estimate
from engine.plan import Plan
from gui.views.chart_common import BAR_WIDTH, LABEL_ROOM, LINE_HALF, bar_order
from gui.views.chart_data import Panel, panels, stage_bars
from gui.views.chart_scale import bar_label, note_lines, panel_scale
from gui.views.colors import CAPACITY_COLOR, HEADROOM_FILL, LIMIT_COLOR, group_color
from gui.views.paint_axes import ValueAxis, set_pixel_font, text_in

SIDE_WIDTHS = {"host": 230.0, "nvme": 175.0}
"""Widest the host RAM and NVMe panels get (as in the window); HBM takes the rest."""
PANEL_SPACING = 18.0
AXIS_ROOM = 62.0
"""Left of a plot: tick labels and the rotated unit (:class:`ValueAxis`)."""
TITLE_PX, NOTE_PX, LABEL_PX = 14, 11, 11
TICK_ROOM = 18.0
"""Under a plot: the bar names."""


def paint_panel(
    painter: QPainter, rect: QRectF, panel: Panel, units: str, ink: QColor, lines: int = 0
) -> None:
    """Draw ``panel`` into ``rect``: title and notes (padded to ``lines`` lines so panels
    side by side keep their plots level), axis, stacked bars, the hatched low–high
    spread, the headroom band, limit and capacity lines, and a label over each bar."""
    notes = note_lines(panel, units)
    title_h = TITLE_PX + 6 + max(lines, len(notes)) * (NOTE_PX + 3)
    text_in(painter, QRectF(rect.left(), rect.top(), rect.width(), TITLE_PX + 4), panel.title, ink,
            TITLE_PX)  # fmt: skip
    for i, note in enumerate(notes):
        y = rect.top() + TITLE_PX + 6 + i * (NOTE_PX + 3)
        text_in(painter, QRectF(rect.left(), y, rect.width(), NOTE_PX + 3), note, ink, NOTE_PX)
    plot = QRectF(
        rect.left() + AXIS_ROOM,
        rect.top() + title_h + LABEL_PX + 6,
        rect.width() - AXIS_ROOM,
        rect.height() - title_h - LABEL_PX - 6 - TICK_ROOM,
    )
    view = panel_scale(panel)
    # for_bytes pads by 5% before rounding up to a tick; the panel top is padded already
    axis = ValueAxis.for_bytes(plot, round(view.top / 1.05), units)
    axis.draw(painter, ink, QColor(ink.red(), ink.green(), ink.blue(), 50))
    n = max(len(panel.bars), 1)
    slot = plot.width() / n

    def cx(i: int) -> float:
        return plot.left() + (i + 0.5) * slot

    half = BAR_WIDTH * slot / 2
    painter.setPen(QPen(ink, 0.5))
    for i, bar in enumerate(panel.bars):
        base = 0
        for group in bar_order(panel):
            seg = next((s for s in bar.segments if s.group == group), None)
            if seg is None or seg.low <= 0:
                continue
            top = axis.y(base + seg.low)
            painter.setBrush(group_color(group))
            painter.drawRect(QRectF(cx(i) - half, top, 2 * half, axis.y(base) - top))
            base += seg.low
        if bar.high > bar.low:
            painter.setPen(QPen(ink, 0.8, Qt.PenStyle.DashLine))
            painter.setBrush(QBrush(ink, Qt.BrushStyle.BDiagPattern))
            top = axis.y(bar.high)
            painter.drawRect(QRectF(cx(i) - half, top, 2 * half, axis.y(bar.low) - top))
            painter.setPen(QPen(ink, 0.5))
    painter.setBrush(Qt.BrushStyle.NoBrush)
    _lines(painter, panel, axis, cx, slot, view.off_scale)
    _labels(painter, panel, units, ink, axis, cx, slot, plot)


def _lines(
    painter: QPainter,
    panel: Panel,
    axis: ValueAxis,
    cx: Callable[[int], float],
    slot: float,
    off_scale: frozenset[int],
) -> None:
    """The headroom band, limit (dashed) and capacity lines over each bar whose
    capacity is on the axis (one above it is named in the note instead)."""
    for i, bar in enumerate(panel.bars):
        if not bar.capacity or i in off_scale:
            continue
        left = cx(i) - LINE_HALF * slot
        right = cx(i) + LINE_HALF * slot
        cap = axis.y(bar.capacity)
        if bar.limit is not None:
            lim = axis.y(bar.limit)
            painter.fillRect(QRectF(left, cap, right - left, lim - cap), HEADROOM_FILL)
            painter.setPen(QPen(QColor(LIMIT_COLOR), 1.5, Qt.PenStyle.DashLine))
            painter.drawLine(QPointF(left, lim), QPointF(right, lim))
        painter.setPen(QPen(QColor(CAPACITY_COLOR), 2.0))
        painter.drawLine(QPointF(left, cap), QPointF(right, cap))


def _labels(
    painter: QPainter,
    panel: Panel,
    units: str,
    ink: QColor,
    axis: ValueAxis,
    cx: Callable[[int], float],
    slot: float,
    plot: QRectF,
) -> None:
    """Each bar's figure over it (full "48.6–57.9" when every one fits between bars,
    else the high end alone) and its name under the axis (▲ marks the highlight)."""
    set_pixel_font(painter, LABEL_PX, bold=True)
    wide = max((QFontMetricsF(painter.font()).horizontalAdvance(bar_label(b, units))
                for b in panel.bars), default=0.0)  # fmt: skip
    compact = wide > slot * LABEL_ROOM
    for i, bar in enumerate(panel.bars):
        x = cx(i)
        box = QRectF(x - slot / 2, axis.y(bar.high) - LABEL_PX - 4, slot, LABEL_PX + 3)
        text = bar_label(bar, units, compact=compact)
        text_in(painter, box, text, ink, LABEL_PX, bold=bar.highlight)
        name = ("▲ " if bar.highlight else "") + bar.label
        under = QRectF(x - slot / 2, plot.bottom() + 3, slot, TICK_ROOM - 3)
        text_in(painter, under, name, ink, LABEL_PX, Qt.AlignmentFlag.AlignHCenter)


def paint_estimate(
    painter: QPainter, rect: QRectF, plan: Plan, est: Estimate, units: str, ink: QColor
) -> None:
    """The ledger chart: HBM by phase, host RAM and NVMe panels side by side."""
    found = panels(plan, est)
    lines = max(len(note_lines(p, units)) for p in found)
    side = sum(SIDE_WIDTHS.get(p.key, 0.0) for p in found)
    hbm_w = rect.width() - side - PANEL_SPACING * (len(found) - 1)
    x = rect.left()
    for panel in found:
        w = SIDE_WIDTHS.get(panel.key, hbm_w)
        paint_panel(painter, QRectF(x, rect.top(), w, rect.height()), panel, units, ink, lines)
        x += w + PANEL_SPACING


def paint_stages(
    painter: QPainter, rect: QRectF, plan: Plan, est: Estimate, units: str, ink: QColor
) -> None:
    """HBM of every pipeline stage at its own peak phase; the heaviest marked ▲."""
    panel = Panel(
        "stages",
        f"HBM per rank, each stage at its peak phase (▲ heaviest: stage {est.heaviest_stage})",
        stage_bars(plan, est),
    )
    paint_panel(painter, rect, panel, units, ink)
