"""The sweep chart on screen (the Sweep panel): :func:`gui.views.sweep_paint.draw_sweep`
onto a widget, the same drawing the report records for paper."""

from __future__ import annotations

from PySide6.QtCore import QRectF
from PySide6.QtGui import QPainter, QPaintEvent
from PySide6.QtWidgets import QWidget

from engine.whatif.sweep import Sweep
from gui.views.sweep_paint import draw_sweep


class SweepChart(QWidget):
    """The sweep chart on screen; empty until a sweep is shown."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("sweepChart")
        self.setMinimumHeight(150)
        self.sweep: Sweep | None = None
        self.units = "gb"

    def show_sweep(self, s: Sweep | None, units: str) -> None:
        self.sweep, self.units = s, units
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:
        if self.sweep is None or not self.sweep.points:
            return
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        draw_sweep(painter, QRectF(self.rect()), self.sweep, self.units)
        painter.end()
