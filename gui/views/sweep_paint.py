"""The sweep chart: peak HBM per rank (low–high) against the varied input.

Drawn by :func:`draw_sweep` onto any painter — the window's :class:`SweepChart` and
the report's vector recording — so screen and paper agree. The low–high range is a
hatched band between the low and high lines (as the ledger chart hatches it), each
value a dot in its verdict's colour; the usable capacity (solid red) and the limit
(dashed amber, capacity less headroom) run across with the headroom band shaded; the
fit boundary is a dashed vertical marker; a value the plan cannot take is an ✕ on the
axis. Values sit at even steps, labelled (a geometric range reads as a log axis).
"""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QPainter, QPen, QPolygonF

from engine.whatif.sweep import Sweep, show_value
from gui.views.chart_common import foreground
from gui.views.colors import CAPACITY_COLOR, LIMIT_COLOR, VERDICT_COLORS
from gui.views.paint_axes import ValueAxis, set_pixel_font, text_in

BAND_COLOR = "#4C78A8"
BOUNDARY_COLOR = "#1E8E3E"
INVALID_COLOR = "#7F7F7F"
MARGINS = (66.0, 40.0, 16.0, 46.0)  # left, top, right, bottom (px)
SCALE_CAP = 3.0
"""The value axis stops at this many times the capacity: a sweep whose last values need
terabytes would otherwise flatten the fit boundary into the axis. Values above it run
off the top, marked ↑ with their size (the table lists them all)."""


def _xs(plot: QRectF, n: int) -> list[float]:
    if n == 1:
        return [plot.center().x()]
    pad = plot.width() / (2 * n)
    step = (plot.width() - 2 * pad) / (n - 1)
    return [plot.left() + pad + i * step for i in range(n)]


def _line(painter: QPainter, pts: list[QPointF], pen: QPen) -> None:
    painter.setPen(pen)
    painter.drawPolyline(QPolygonF(pts))


def draw_sweep(
    painter: QPainter, rect: QRectF, s: Sweep, units: str, ink: QColor | None = None
) -> None:
    """Draw sweep ``s`` into ``rect`` (axis in GB, or GiB when ``units`` is gib)."""
    fg = ink or foreground()
    grid = QColor(fg)
    grid.setAlpha(45)
    left, top, right, bottom = MARGINS
    plot = rect.adjusted(left, top, -right, -bottom)
    ok = [(i, p) for i, p in enumerate(s.points) if p.ok]
    text_in(
        painter,
        QRectF(rect.left(), rect.top(), rect.width(), top - 6),
        f"Peak HBM per rank against {s.path} — {s.summary()}",
        fg,
        11,
        bold=True,
    )
    capacity = max((p.capacity or 0 for _, p in ok), default=0)
    highest = max((p.high or 0 for _, p in ok), default=0)
    shown = min(highest, int(SCALE_CAP * capacity)) if capacity else highest
    axis = ValueAxis.for_bytes(plot, max(capacity, shown, 1), units)
    axis.draw(painter, fg, grid)
    xs = _xs(plot, len(s.points))
    if ok:
        painter.save()
        painter.setClipRect(plot.adjusted(-6, -6, 6, 1))
        _limits(painter, axis, [(xs[i], p.limit or 0, p.capacity or 0) for i, p in ok])
        lows = [QPointF(xs[i], axis.y(p.low or 0)) for i, p in ok]
        highs = [QPointF(xs[i], axis.y(p.high or 0)) for i, p in ok]
        band = QColor(BAND_COLOR)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QBrush(band, Qt.BrushStyle.BDiagPattern))
        painter.drawPolygon(QPolygonF([*highs, *reversed(lows)]))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        _line(painter, highs, QPen(band, 2.0))
        _line(painter, lows, QPen(band, 1.2, Qt.PenStyle.DashLine))
        for (_, p), hi, lo in zip(ok, highs, lows, strict=True):
            color = QColor(VERDICT_COLORS[p.verdict or "fits"])
            painter.setPen(QPen(color.darker(130), 1.0))
            painter.setBrush(color)
            painter.drawEllipse(hi, 4.0, 4.0)
            painter.drawEllipse(lo, 2.5, 2.5)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.restore()
        _off_scale(painter, axis, [(xs[i], p.high or 0) for i, p in ok], fg)
    _x_labels(painter, s, xs, plot, fg)
    b = s.boundary
    if b is not None:
        x = xs[b.index]
        painter.setPen(QPen(QColor(BOUNDARY_COLOR), 1.6, Qt.PenStyle.DashLine))
        painter.drawLine(QPointF(x, plot.top()), QPointF(x, plot.bottom()))
        text_in(
            painter,
            QRectF(x - 90, plot.top() + 2, 180, 14),
            f"{b.kind} that fits: {show_value(b.value)}",
            QColor(BOUNDARY_COLOR),
            10,
            bold=True,
        )


def _off_scale(
    painter: QPainter, axis: ValueAxis, highs: list[tuple[float, int]], fg: QColor
) -> None:
    """Mark the values whose high peak runs above the axis: ↑ and the size."""
    scale, unit = axis.scale, axis.unit
    for x, high in highs:
        if axis.y(high) < axis.plot.top() - 1:
            text_in(
                painter,
                QRectF(x - 45, axis.plot.top() - 16, 90, 14),
                f"↑ {high / scale:,.0f} {unit}",
                fg,
                9,
            )


def _limits(painter: QPainter, axis: ValueAxis, pts: list[tuple[float, int, int]]) -> None:
    """Capacity and limit across the plot (steps if a swept field moves them)."""
    left, right = axis.plot.left(), axis.plot.right()

    def steps(values: list[tuple[float, int]]) -> list[QPointF]:
        out = [QPointF(left, axis.y(values[0][1]))]
        for k, (x, v) in enumerate(values):
            nxt = values[k + 1][0] if k + 1 < len(values) else None
            edge = right if nxt is None else (x + nxt) / 2
            out += [QPointF(out[-1].x(), axis.y(v)), QPointF(edge, axis.y(v))]
        return out

    limit = steps([(x, lim) for x, lim, _ in pts])
    cap = steps([(x, c) for x, _, c in pts])
    shade = QColor(LIMIT_COLOR)
    shade.setAlpha(45)
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(shade)
    painter.drawPolygon(QPolygonF([*cap, *reversed(limit)]))
    painter.setBrush(Qt.BrushStyle.NoBrush)
    _line(painter, limit, QPen(QColor(LIMIT_COLOR), 1.5, Qt.PenStyle.DashLine))
    _line(painter, cap, QPen(QColor(CAPACITY_COLOR), 2.0))
    set_pixel_font(painter, 10)
    end_cap, end_lim = cap[-1], limit[-1]
    painter.setPen(QColor(CAPACITY_COLOR))
    align = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignBottom
    painter.drawText(QRectF(end_cap.x() - 200, end_cap.y() - 15, 198, 14), align, "usable capacity")
    painter.setPen(QColor(LIMIT_COLOR).darker(115))
    top_align = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop
    painter.drawText(
        QRectF(end_lim.x() - 200, end_lim.y() + 2, 198, 14), top_align, "limit (less headroom)"
    )


def _x_labels(painter: QPainter, s: Sweep, xs: list[float], plot: QRectF, fg: QColor) -> None:
    every = max(1, len(xs) // 12)  # at most about a dozen labels
    for i, (x, p) in enumerate(zip(xs, s.points, strict=True)):
        own = p.value == s.base_value
        if not p.ok:
            text_in(
                painter, QRectF(x - 8, plot.bottom() - 16, 16, 14), "✕", QColor(INVALID_COLOR), 12
            )
        if i % every and not own:
            continue
        label = show_value(p.value) + (" ▲" if own else "")
        color = fg if p.ok else QColor(INVALID_COLOR)
        text_in(painter, QRectF(x - 45, plot.bottom() + 3, 90, 14), label, color, 10, bold=own)
    note = f"{s.path}   (▲ the plan's value; ✕ cannot be estimated)"
    text_in(painter, QRectF(plot.left(), plot.bottom() + 20, plot.width(), 16), note, fg, 10)
