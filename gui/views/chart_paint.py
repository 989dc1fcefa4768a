"""The ledger chart drawn with a bare ``QPainter``: the window's chart and the report's.

The panels of :mod:`gui.views.chart_data` — bars stacked by ledger group, the low–high
spread hatched, capacity and limit lines, labels and capacity notes
(:mod:`gui.views.chart_scale`, :mod:`gui.views.chart_common`) — drawn onto any painter:
the window's chart widgets (:mod:`gui.views.chart`) in their ``paintEvent`` and a
``QPicture`` recording in the report, so screen and paper are one drawing. It builds no
plot items (an edit repaints a few dozen rectangles and labels) and imports neither
pyqtgraph nor numpy, so the window starts without them and a report runs on any thread.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QFontMetricsF, QPainter, QPen

from engine.estimate import Estimate
from engine.plan import Plan
from gui.views.chart_common import BAR_WIDTH, LABEL_ROOM, LINE_HALF, bar_order
from gui.views.chart_data import Bar, Panel, panels, stage_bars
from gui.views.chart_scale import bar_label, note_lines, panel_scale
from gui.views.colors import CAPACITY_COLOR, HEADROOM_FILL, LIMIT_COLOR, group_color
from gui.views.paint_axes import ValueAxis, set_pixel_font, text_in

SIDE_WIDTHS = {"host": 230.0, "nvme": 175.0}
"""Widest the host RAM and NVMe panels get (as in the window); HBM takes the rest."""
PANEL_SPACING = 18.0
AXIS_ROOM = 62.0
"""Left of a plot: tick labels and the rotated unit (:class:`ValueAxis`)."""
TITLE_PX, NOTE_PX, LABEL_PX = 14, 11, 11
MIN_LABEL_PX = 8
TICK_ROOM = 18.0
"""Under a plot: the bar names."""


@dataclass(frozen=True, slots=True)
class Painted:
    """What one panel's drawing put on the axis, in bytes: each bar's top (its stacked
    segments, plus the spread when hatched: the fit figure; the releasable cache drawn
    over it is not counted) and each capacity line drawn (one off the axis is named in
    the note instead). Tests read the drawing from it."""

    axis: ValueAxis
    tops: tuple[int, ...]
    capacities: tuple[int, ...]
    cached: tuple[int, ...] = ()  # each bar's top with its releasable cache outlined
    labels: tuple[QRectF | None, ...] = ()  # each bar's figure box (None: left out)


def paint_panel(
    painter: QPainter, rect: QRectF, panel: Panel, units: str, ink: QColor, lines: int = 0
) -> Painted:
    """Draw ``panel`` into ``rect``: title and notes (padded to ``lines`` lines so panels
    side by side keep their plots level), axis, stacked bars, the hatched low–high
    spread, the releasable allocator cache outlined over it, the headroom band, limit
    and capacity lines, and a label over each bar."""
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
    tops: list[int] = []
    cached: list[int] = []
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
        tops.append(base + max(bar.high - bar.low, 0))
        cached.append(_cache(painter, bar, axis, cx(i), half, ink))
    painter.setBrush(Qt.BrushStyle.NoBrush)
    caps = _lines(painter, panel, axis, cx, slot, view.off_scale)
    boxes = _labels(painter, panel, units, ink, axis, cx, slot, plot)
    return Painted(axis, tuple(tops), caps, tuple(cached), boxes)


def _cache(painter: QPainter, bar: Bar, axis: ValueAxis, x: float, half: float, ink: QColor) -> int:
    """The allocator's releasable cache over the bar (:attr:`Bar.cache`): a dotted
    outline with a light hatch, not a solid block, because the allocator frees it and
    retries before an out-of-memory — reserved stays visible without counting toward fit.
    Returns the outline's top in bytes (the bar's high when there is none)."""
    if bar.cache[1] <= 0:
        return bar.high
    top = axis.y(bar.reserved_high)
    painter.setPen(QPen(ink, 1.0, Qt.PenStyle.DotLine))
    painter.setBrush(
        QBrush(QColor(ink.red(), ink.green(), ink.blue(), 70), Qt.BrushStyle.Dense7Pattern)
    )
    painter.drawRect(QRectF(x - half, top, 2 * half, axis.y(bar.high) - top))
    painter.setPen(QPen(ink, 0.5))
    return bar.reserved_high


def _lines(
    painter: QPainter,
    panel: Panel,
    axis: ValueAxis,
    cx: Callable[[int], float],
    slot: float,
    off_scale: frozenset[int],
) -> tuple[int, ...]:
    """The headroom band, limit (dashed) and capacity lines over each bar whose
    capacity is on the axis (one above it is named in the note instead); the
    capacities drawn."""
    drawn: list[int] = []
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
        drawn.append(bar.capacity)
    return tuple(drawn)


def _labels(
    painter: QPainter,
    panel: Panel,
    units: str,
    ink: QColor,
    axis: ValueAxis,
    cx: Callable[[int], float],
    slot: float,
    plot: QRectF,
) -> tuple[QRectF | None, ...]:
    """Each bar's figure over it (full "48.6–57.9" when every one fits between bars,
    else the high end alone) and its name under the axis (▲ marks the highlight); the
    figure boxes drawn.

    A figure sits over everything drawn for its bar — the releasable cache outline
    included — not inside that outline, where it crowded the hatch of a short bar; one
    wider than its share of the slot even as the high end alone is left out rather
    than written over its neighbours (the ledger table has every figure)."""
    set_pixel_font(painter, LABEL_PX, bold=True)
    metrics = QFontMetricsF(painter.font())
    room = slot * LABEL_ROOM
    wide = max((metrics.horizontalAdvance(bar_label(b, units)) for b in panel.bars),
               default=0.0)  # fmt: skip
    compact = wide > room
    names = [("▲ " if bar.highlight else "") + bar.label for bar in panel.bars]
    name_px = _fitting_px(painter, names, room)
    boxes: list[QRectF | None] = []
    for i, bar in enumerate(panel.bars):
        x = cx(i)
        text = bar_label(bar, units, compact=compact)
        box: QRectF | None = None
        if metrics.horizontalAdvance(text) <= room:
            top = axis.y(bar.reserved_high if bar.cache[1] > 0 else bar.high)
            box = QRectF(x - room / 2, top - LABEL_PX - 4, room, LABEL_PX + 3)
            text_in(painter, box, text, ink, LABEL_PX, bold=bar.highlight)
        boxes.append(box)
        under = QRectF(x - slot / 2, plot.bottom() + 3, slot, TICK_ROOM - 3)
        text_in(painter, under, names[i], ink, name_px, Qt.AlignmentFlag.AlignHCenter)
    return tuple(boxes)


def _fitting_px(painter: QPainter, texts: list[str], room: float) -> int:
    """The largest label size, down to ``MIN_LABEL_PX``, at which every text fits
    ``room`` on one line: a narrow window shrinks the bar names rather than wrap
    "▲ Backward" onto a second line the plot has no room for."""
    px = LABEL_PX
    while px > MIN_LABEL_PX:
        set_pixel_font(painter, px)
        metrics = QFontMetricsF(painter.font())
        if all(metrics.horizontalAdvance(t) <= room for t in texts):
            break
        px -= 1
    return px


def paint_panels(
    painter: QPainter, rect: QRectF, found: tuple[Panel, ...], units: str, ink: QColor
) -> dict[str, Painted]:
    """Panels side by side (host RAM and NVMe at their widths, HBM the rest), their
    notes padded alike so the plots stay level; what each drew, by panel key."""
    if not found:
        return {}
    lines = max(len(note_lines(p, units)) for p in found)
    side = sum(SIDE_WIDTHS.get(p.key, 0.0) for p in found)
    hbm_w = rect.width() - side - PANEL_SPACING * (len(found) - 1)
    x = rect.left()
    out = {}
    for panel in found:
        w = SIDE_WIDTHS.get(panel.key, hbm_w)
        box = QRectF(x, rect.top(), w, rect.height())
        out[panel.key] = paint_panel(painter, box, panel, units, ink, lines)
        x += w + PANEL_SPACING
    return out


def paint_estimate(
    painter: QPainter, rect: QRectF, plan: Plan, est: Estimate, units: str, ink: QColor
) -> None:
    """The ledger chart: HBM by phase, host RAM and NVMe panels side by side."""
    paint_panels(painter, rect, panels(plan, est), units, ink)


def paint_stages(
    painter: QPainter, rect: QRectF, plan: Plan, est: Estimate, units: str, ink: QColor
) -> None:
    """HBM of every pipeline stage at its own peak phase; the heaviest marked ▲."""
    paint_panel(painter, rect, stage_panel(plan, est), units, ink)


def stage_panel(plan: Plan, est: Estimate) -> Panel:
    """The Stages chart's one panel: every stage at its own peak phase."""
    return Panel(
        "stages",
        f"HBM per rank, each stage at its peak phase (▲ heaviest: stage {est.heaviest_stage})",
        stage_bars(plan, est),
    )
