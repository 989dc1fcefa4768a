"""The Stages tab: the per-stage chart when the plan has pipeline stages, else a note.

The chart is drawn while the tab is on screen, and otherwise when it is next shown:
with PP 16 it is 16 labelled bars, a quarter of an edit's redraw, for a tab the user
is not looking at. It is made when a plan first has stages (most plans never do).
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import QLabel, QStackedWidget, QWidget

from engine.estimate import Estimate
from engine.plan import Plan
from gui.views.chart import StageChart

SINGLE_STAGE_NOTE = (
    "Single pipeline stage (PP = 1): every rank holds the same "
    "layers. Set PP > 1 on the Parallelism tab to compare stages."
)


class StagesView(QStackedWidget):
    """The note or the stage chart; the chart follows the estimate while it is shown."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.note = QLabel(SINGLE_STAGE_NOTE, self)
        self.note.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.note.setWordWrap(True)
        self.addWidget(self.note)
        self.chart: StageChart | None = None
        self._pending: tuple[Plan, Estimate, str] | None = None  # to draw when shown

    def show_estimate(self, plan: Plan, est: Estimate, units: str) -> None:
        if len(est.stages) <= 1:
            self._pending = None
            self.setCurrentWidget(self.note)
            return
        if self.chart is None:
            self.chart = StageChart(self)
            self.addWidget(self.chart)
        self.setCurrentWidget(self.chart)
        self._pending = (plan, est, units)
        if self.isVisible():
            self._draw()

    def showEvent(self, event: QShowEvent) -> None:
        self._draw()
        super().showEvent(event)

    def _draw(self) -> None:
        if self._pending is not None and self.chart is not None:
            self.chart.show_estimate(*self._pending)
            self._pending = None
