"""The comparison chart: each plan's peak against its limit, and the rows that moved.

Drawn by :func:`draw_comparison` onto any painter (the compare window and the report's
vector recording). Left: one bar per plan, the low estimate solid and the low–high
range hatched on top, the plan's usable capacity (solid red) and limit (dashed amber)
across its bar, the verdict under it. Right: the rows that changed most against the
baseline, one bar per other plan, growing right (more bytes) or left (fewer).
"""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QWidget

from engine.estimate import VERDICT_WORDS
from engine.units import UnitChoice, fmt_gb, fmt_gib
from engine.whatif.compare import Comparison, signed_size
from gui.views.chart_common import foreground
from gui.views.colors import CAPACITY_COLOR, LIMIT_COLOR, VERDICT_COLORS
from gui.views.paint_axes import ValueAxis, set_pixel_font, text_in

SIDE_COLORS = ("#4C78A8", "#F58518", "#54A24B", "#B279A2", "#E45756", "#72B7B2")
"""One colour per compared plan (the baseline first), repeated past six plans."""
ROWS_CHARTED = 8
"""Changed rows drawn on the right (the tables list them all)."""


VERDICT_PX = 9
VERDICT_BOX_HEIGHT = 30
"""Room for the verdict under a bar: "STRADDLES THE LIMIT" wraps in a narrow slot (the
report's chart gives each of two plans ~100 px), and a one-line box clipped both lines
in the PDF. With four or more plans the text also shrinks (:func:`verdict_px`)."""
_WRAP_TOP = Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop


def verdict_px(painter: QPainter, box: QRectF, text: str) -> int:
    """The largest pixel size, from :data:`VERDICT_PX` down to 6, at which ``text``
    wrapped in ``box`` fits its height."""
    for px in range(VERDICT_PX, 5, -1):
        set_pixel_font(painter, px, True)
        flags = int(_WRAP_TOP) | int(Qt.TextFlag.TextWordWrap)
        if painter.fontMetrics().boundingRect(box.toRect(), flags, text).height() <= box.height():
            return px
    return 6


def verdict_box(plot: QRectF, i: int, slot: float) -> QRectF:
    """Where plan ``i``'s verdict is written, under its name below the plot."""
    return QRectF(plot.left() + i * slot, plot.bottom() + 18, slot, VERDICT_BOX_HEIGHT)


def side_color(i: int) -> QColor:
    return QColor(SIDE_COLORS[i % len(SIDE_COLORS)])


def draw_comparison(
    painter: QPainter, rect: QRectF, c: Comparison, units: str, ink: QColor | None = None
) -> None:
    """Draw comparison ``c`` into ``rect``."""
    fg = ink or foreground()
    split = rect.left() + rect.width() * 0.42
    _peaks(
        painter, QRectF(rect.left(), rect.top(), split - rect.left(), rect.height()), c, units, fg
    )
    _deltas(
        painter,
        QRectF(split + 10, rect.top(), rect.right() - split - 10, rect.height()),
        c,
        units,
        fg,
    )


def _peaks(painter: QPainter, rect: QRectF, c: Comparison, units: str, fg: QColor) -> None:
    grid = QColor(fg)
    grid.setAlpha(45)
    text_in(
        painter,
        QRectF(rect.left(), rect.top(), rect.width(), 18),
        "Peak HBM per rank (must fit), per plan",
        fg,
        11,
        bold=True,
    )
    plot = rect.adjusted(64, 26, -6, -(18 + VERDICT_BOX_HEIGHT + 2))
    ests = [s.estimate for s in c.sides]
    largest = max(
        [1, *(e.fit_peak.high for e in ests if e), *(e.capacity_bytes for e in ests if e)]
    )
    axis = ValueAxis.for_bytes(plot, largest, units)
    axis.draw(painter, fg, grid)
    n = len(c.sides)
    slot = plot.width() / n
    for i, side in enumerate(c.sides):
        x0 = plot.left() + i * slot + slot * 0.2
        w = slot * 0.6
        label = QRectF(plot.left() + i * slot, plot.bottom() + 3, slot, 14)
        set_pixel_font(painter, 10)
        name = painter.fontMetrics().elidedText(side.name, Qt.TextElideMode.ElideMiddle, int(slot))
        text_in(painter, label, name, fg, 10)
        e = side.estimate
        if e is None:
            text_in(
                painter,
                QRectF(x0 - 10, plot.bottom() - 30, w + 20, 28),
                "cannot be computed",
                QColor("#7F7F7F"),
                9,
            )
            continue
        color = side_color(i)
        low_y, high_y = axis.y(e.fit_peak.low), axis.y(e.fit_peak.high)
        painter.fillRect(QRectF(x0, low_y, w, plot.bottom() - low_y), color)
        painter.setPen(QPen(fg, 0.8, Qt.PenStyle.DashLine))
        painter.setBrush(QBrush(fg, Qt.BrushStyle.BDiagPattern))
        painter.drawRect(QRectF(x0, high_y, w, low_y - high_y))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        for value, pen in (
            (e.capacity_bytes, QPen(QColor(CAPACITY_COLOR), 2.0)),
            (e.limit_bytes, QPen(QColor(LIMIT_COLOR), 1.6, Qt.PenStyle.DashLine)),
        ):
            painter.setPen(pen)
            y = axis.y(value)
            painter.drawLine(QPointF(x0 - slot * 0.12, y), QPointF(x0 + w + slot * 0.12, y))
        box, words = verdict_box(plot, i, slot), VERDICT_WORDS[e.verdict]
        px = verdict_px(painter, box, words)
        text_in(painter, box, words, QColor(VERDICT_COLORS[e.verdict]), px, _WRAP_TOP, bold=True)
        size = fmt_gib(e.fit_peak.high) if units == "gib" else fmt_gb(e.fit_peak.high)
        text_in(painter, QRectF(x0 - 20, high_y - 15, w + 40, 14), size, fg, 9)


def _deltas(painter: QPainter, rect: QRectF, c: Comparison, units: str, fg: QColor) -> None:
    base = c.sides[0].name
    text_in(
        painter,
        QRectF(rect.left(), rect.top(), rect.width(), 18),
        f"Rows that changed most (high estimate, against {base})",
        fg,
        11,
        bold=True,
    )
    rows = c.changed_rows[:ROWS_CHARTED]
    if not rows:
        text_in(
            painter,
            rect.adjusted(0, 30, 0, 0),
            "No ledger row differs.",
            fg,
            10,
            Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignHCenter,
        )
        return
    others = range(1, len(c.sides))
    largest = max(abs(r.delta(i)[1]) for r in rows for i in others) or 1
    label_w, value_w = min(190.0, rect.width() * 0.38), 64.0
    mid = rect.left() + label_w + (rect.width() - label_w) / 2
    half = (rect.width() - label_w) / 2 - value_w
    row_h = (rect.height() - 40) / len(rows)
    bar_h = max(3.0, min(14.0, (row_h - 4) / max(1, len(others))))
    u: UnitChoice = "gib" if units == "gib" else "gb"
    painter.setPen(QPen(fg, 0.8))
    painter.drawLine(
        QPointF(mid, rect.top() + 24), QPointF(mid, rect.top() + 24 + row_h * len(rows))
    )
    for k, r in enumerate(rows):
        y = rect.top() + 24 + k * row_h
        set_pixel_font(painter, 9)
        name = painter.fontMetrics().elidedText(
            r.id, Qt.TextElideMode.ElideMiddle, int(label_w - 8)
        )
        text_in(
            painter,
            QRectF(rect.left(), y, label_w - 6, row_h),
            name,
            fg,
            9,
            Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
        )
        for j, i in enumerate(others):
            d = r.delta(i)[1]
            if d == 0:
                continue  # unchanged against the baseline: no bar, no label
            w = half * abs(d) / largest
            top = y + (row_h - bar_h * len(others)) / 2 + j * bar_h
            box = QRectF(mid, top, w, bar_h - 1) if d >= 0 else QRectF(mid - w, top, w, bar_h - 1)
            painter.fillRect(box, side_color(i))
            align = Qt.AlignmentFlag.AlignVCenter | (
                Qt.AlignmentFlag.AlignLeft if d >= 0 else Qt.AlignmentFlag.AlignRight
            )
            where = (
                QRectF(box.right() + 3, top - 2, value_w, bar_h + 4)
                if d >= 0
                else QRectF(box.left() - value_w - 3, top - 2, value_w, bar_h + 4)
            )
            text_in(painter, where, signed_size(d, u), fg, 9, align)
    x = rect.left() + label_w
    for i in others:  # the legend: each other plan's colour and name
        painter.fillRect(QRectF(x, rect.bottom() - 13, 9, 9), side_color(i))
        text_in(
            painter,
            QRectF(x + 12, rect.bottom() - 16, 160, 14),
            c.sides[i].name,
            fg,
            9,
            Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
        )
        x += 24 + painter.fontMetrics().horizontalAdvance(c.sides[i].name)


class ComparisonChart(QWidget):
    """The comparison chart on screen."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("comparisonChart")
        self.setMinimumHeight(230)
        self.comparison: Comparison | None = None
        self.units = "gb"

    def show_comparison(self, c: Comparison | None, units: str) -> None:
        self.comparison, self.units = c, units
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:
        if self.comparison is None:
            return
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        draw_comparison(painter, QRectF(self.rect()), self.comparison, self.units)
        painter.end()
