"""The trace chart on screen (the Measured tab): :func:`gui.views.trace_paint.draw_trace`
onto a widget, the same drawing the report records for paper."""

from __future__ import annotations

from PySide6.QtCore import QRectF
from PySide6.QtGui import QPainter, QPaintEvent
from PySide6.QtWidgets import QWidget

from engine.trace.compare import Comparison
from gui.views.trace_paint import draw_trace


class TraceChart(QWidget):
    """The trace chart on screen (the Measured tab)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("traceChart")
        self.setMinimumHeight(150)
        self.comparison: Comparison | None = None
        self.units = "gb"

    def show_comparison(self, cmp: Comparison | None, units: str) -> None:
        self.comparison, self.units = cmp, units
        self.setVisible(cmp is not None)
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:
        if self.comparison is None:
            return
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        draw_trace(painter, QRectF(self.rect()).adjusted(4, 4, -4, -2), self.comparison, self.units)
        painter.end()
