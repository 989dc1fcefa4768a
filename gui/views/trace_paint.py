"""The trace chart: what PyTorch allocated (traced) beside the ledger's range.

Drawn by :func:`draw_trace` onto any painter — the Measured tab's :class:`TraceChart`
and the report's vector recording — from one :class:`engine.trace.compare.Comparison`.
Left: each ledger group at the peak, a horizontal bar per side: the ledger's low solid
with its low–high range hatched, and the traced bytes beneath. Right: each phase's
peak the same way, as columns. A traced figure outside the ledger's range has its
value in red.
"""

from __future__ import annotations

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QPainter, QPen

from engine.trace.compare import SKEWED, Comparison, Line
from engine.units import UnitChoice, fmt_bytes
from gui.views.chart_common import foreground
from gui.views.paint_axes import ValueAxis, set_pixel_font, text_in

TRACED_COLOR = "#F58518"
LEDGER_COLOR = "#4C78A8"
OUTSIDE_COLOR = "#D62728"
PHASE_NAMES: dict[str, str] = {
    "forward": "forward",
    "backward": "backward",
    "optimizer": "optimizer",
    "steady": "steady",
}

_LEFT = Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter


def _units(units: str) -> UnitChoice:
    return "gib" if units == "gib" else "gb"


def charted_groups(cmp: Comparison) -> list[Line]:
    """The groups worth a bar: traced or counted bytes, not the derived skew sum."""
    derived = " + ".join(SKEWED)
    return [g for g in cmp.groups if g.name != derived and (g.traced or (g.high or 0))]


def _ledger_box(painter: QPainter, solid: QRectF, hatched: QRectF, fg: QColor) -> None:
    painter.fillRect(solid, QColor(LEDGER_COLOR))
    if hatched.width() > 0.5 and hatched.height() > 0.5:
        painter.setPen(QPen(QColor(LEDGER_COLOR), 0.8))
        painter.setBrush(QBrush(QColor(LEDGER_COLOR), Qt.BrushStyle.BDiagPattern))
        painter.drawRect(hatched)
        painter.setBrush(Qt.BrushStyle.NoBrush)


def value_color(line: Line, fg: QColor) -> QColor:
    """Red for a figure outside the ledger's range — not for a group the two sides split
    apart (activations vs logits): its sum is what is judged."""
    return QColor(OUTSIDE_COLOR) if line.inside is False and not line.split_apart else fg


def _title(painter: QPainter, rect: QRectF, title: str, fg: QColor) -> None:
    """A panel's bold title along the top of its ``rect``."""
    text_in(
        painter, QRectF(rect.left(), rect.top(), rect.width(), 16), title, fg, 11, _LEFT, bold=True
    )


def _groups(painter: QPainter, rect: QRectF, cmp: Comparison, units: str, fg: QColor) -> None:
    _title(painter, rect, "At the peak, by ledger group", fg)
    lines = charted_groups(cmp)
    if not lines:
        return
    u = _units(units)
    largest = max(max(g.traced, g.high or 0) for g in lines) or 1
    label_w, value_w = min(110.0, rect.width() * 0.3), 70.0
    left, width = rect.left() + label_w, max(10.0, rect.width() - label_w - value_w)
    row_h = (rect.height() - 22) / len(lines)
    bar_h = max(2.0, min(9.0, (row_h - 3) / 2))
    for k, line in enumerate(lines):
        y = rect.top() + 22 + k * row_h
        set_pixel_font(painter, 9)
        name = painter.fontMetrics().elidedText(
            line.name, Qt.TextElideMode.ElideRight, int(label_w - 6)
        )
        text_in(painter, QRectF(rect.left(), y, label_w - 6, row_h), name, fg, 9, _LEFT)
        top = y + (row_h - 2 * bar_h) / 2
        if line.high:
            low_x = width * (line.low or 0) / largest
            high_x = width * line.high / largest
            _ledger_box(
                painter,
                QRectF(left, top, low_x, bar_h - 1),
                QRectF(left + low_x, top, high_x - low_x, bar_h - 1),
                fg,
            )
        traced_w = width * line.traced / largest
        painter.fillRect(QRectF(left, top + bar_h, traced_w, bar_h - 1), QColor(TRACED_COLOR))
        end = left + max(traced_w, width * (line.high or 0) / largest)
        text_in(
            painter,
            QRectF(end + 3, top - 2, value_w, 2 * bar_h + 4),
            fmt_bytes(line.traced, u),
            value_color(line, fg),
            9,
            _LEFT,
        )


def _phases(painter: QPainter, rect: QRectF, cmp: Comparison, units: str, fg: QColor) -> None:
    _title(painter, rect, "Each phase's peak (steady: after zero_grad)", fg)
    lines = list(cmp.phases)
    if not lines:
        return
    grid = QColor(fg)
    grid.setAlpha(45)
    plot = rect.adjusted(62, 34, -4, -18)
    largest = max(max(p.traced, p.high or 0) for p in lines)
    axis = ValueAxis.for_bytes(plot, largest, units)
    axis.draw(painter, fg, grid)
    slot = plot.width() / len(lines)
    u = _units(units)
    for i, line in enumerate(lines):
        x0, w = plot.left() + i * slot + slot * 0.15, slot * 0.35
        if line.high is not None:
            low_y, high_y = axis.y(line.low or 0), axis.y(line.high)
            _ledger_box(
                painter,
                QRectF(x0, low_y, w, plot.bottom() - low_y),
                QRectF(x0, high_y, w, low_y - high_y),
                fg,
            )
        traced_y = axis.y(line.traced)
        painter.fillRect(
            QRectF(x0 + w, traced_y, w, plot.bottom() - traced_y), QColor(TRACED_COLOR)
        )
        text_in(
            painter,
            QRectF(x0 - slot * 0.1, min(traced_y, axis.y(line.high or 0)) - 15, slot * 0.9, 14),
            fmt_bytes(line.traced, u),
            value_color(line, fg),
            9,
        )
        name = PHASE_NAMES.get(line.name, line.name)
        text_in(painter, QRectF(plot.left() + i * slot, plot.bottom() + 2, slot, 14), name, fg, 9)


def _legend(painter: QPainter, rect: QRectF, fg: QColor) -> None:
    x, y = rect.left(), rect.bottom() - 12
    painter.fillRect(QRectF(x, y, 10, 9), QColor(TRACED_COLOR))
    text_in(
        painter, QRectF(x + 14, y - 3, 190, 14), "traced (simulated, fake tensors)", fg, 9, _LEFT
    )
    x += 200
    _ledger_box(painter, QRectF(x, y, 5, 9), QRectF(x + 5, y, 6, 9), fg)
    text_in(
        painter,
        QRectF(x + 15, y - 3, 260, 14),
        "ledger low (solid) to high (hatched)",
        fg,
        9,
        _LEFT,
    )
    x += 250
    text_in(
        painter,
        QRectF(x, y - 3, 200, 14),
        "red value: outside the ledger's range",
        QColor(OUTSIDE_COLOR),
        9,
        _LEFT,
    )


def draw_trace(
    painter: QPainter, rect: QRectF, cmp: Comparison, units: str, ink: QColor | None = None
) -> None:
    """Draw the trace-vs-ledger comparison ``cmp`` into ``rect``."""
    fg = ink or foreground()
    body = rect.adjusted(0, 0, 0, -18)
    split = body.left() + body.width() * 0.56
    _groups(
        painter,
        QRectF(body.left(), body.top(), split - body.left() - 12, body.height()),
        cmp,
        units,
        fg,
    )
    _phases(painter, QRectF(split, body.top(), body.right() - split, body.height()), cmp, units, fg)
    _legend(painter, rect, fg)
