"""Axes for charts drawn with a bare ``QPainter`` (sweep, comparison, topology).

Those charts are drawn by one function each onto any painter: a widget's
``paintEvent`` on screen and a ``QPicture`` recording in the PDF report, so screen and
paper use the same code and the report keeps them as vectors. This module holds what
they share: a value axis with round ticks in GB or GiB, and text in a box.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QPainter, QPen

from engine.units import GB, GiB

TICK_STEPS = (1.0, 2.0, 2.5, 5.0)
"""Tick spacings within a decade (the round numbers a reader expects on an axis)."""


def unit_of(units: str) -> tuple[int, str]:
    """Bytes per axis unit and its name: GiB when asked, GB otherwise ("both" too)."""
    return (GiB, "GiB") if units == "gib" else (GB, "GB")


def nice_ticks(top: float, wanted: int = 5) -> list[float]:
    """Round tick values from 0 to at least ``top`` (about ``wanted`` of them)."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / wanted
    decade = 10 ** math.floor(math.log10(raw))
    step = next((s * decade for s in TICK_STEPS if s * decade >= raw), 10 * decade)
    count = math.ceil(top / step - 1e-9)
    return [i * step for i in range(count + 1)]


def set_pixel_font(painter: QPainter, px: int, bold: bool = False) -> None:
    font = QFont(painter.font())
    font.setPixelSize(px)
    font.setBold(bold)
    painter.setFont(font)


@dataclass(frozen=True, slots=True)
class ValueAxis:
    """A vertical byte axis over ``plot`` (the area inside the axes)."""

    plot: QRectF
    top: float  # axis units at the top of the plot
    scale: int  # bytes per axis unit
    unit: str

    @classmethod
    def for_bytes(cls, plot: QRectF, largest: int, units: str) -> ValueAxis:
        scale, unit = unit_of(units)
        ticks = nice_ticks(max(largest, 1) / scale * 1.05)
        return cls(plot, ticks[-1], scale, unit)

    def y(self, n_bytes: float) -> float:
        """The painter y of ``n_bytes``."""
        frac = (n_bytes / self.scale) / self.top if self.top else 0.0
        return self.plot.bottom() - frac * self.plot.height()

    def draw(self, painter: QPainter, ink: QColor, grid: QColor) -> None:
        """Ticks, labels, grid lines and the unit, left of the plot."""
        set_pixel_font(painter, 10)
        for value in nice_ticks(self.top * 0.999):
            y = self.y(value * self.scale)
            painter.setPen(QPen(grid, 0.6))
            painter.drawLine(QPointF(self.plot.left(), y), QPointF(self.plot.right(), y))
            painter.setPen(ink)
            label = f"{value:,.0f}" if self.top >= 10 else f"{value:,.1f}"
            painter.drawText(
                QRectF(self.plot.left() - 58, y - 8, 52, 16),
                Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                label,
            )
        painter.setPen(QPen(ink, 1.0))
        painter.drawLine(self.plot.bottomLeft(), self.plot.topLeft())
        painter.drawLine(self.plot.bottomLeft(), self.plot.bottomRight())
        painter.save()
        painter.translate(self.plot.left() - 50, self.plot.center().y())
        painter.rotate(-90)
        painter.drawText(QRectF(-60, -12, 120, 14), Qt.AlignmentFlag.AlignCenter, self.unit)
        painter.restore()


def text_in(
    painter: QPainter,
    rect: QRectF,
    text: str,
    color: QColor,
    px: int = 10,
    align: Qt.AlignmentFlag = Qt.AlignmentFlag.AlignCenter,
    bold: bool = False,
) -> None:
    """``text`` in ``rect`` with the given colour and pixel size."""
    set_pixel_font(painter, px, bold)
    painter.setPen(color)
    painter.drawText(rect, int(align) | int(Qt.TextFlag.TextWordWrap), text)
