"""The window's stacked ledger chart and stage chart: widgets that paint the panels.

Both draw with :mod:`gui.views.chart_paint`, the code that draws the PDF report's
charts, so the window and the paper show one drawing (bars stacked by ledger group,
the low–high spread hatched on top, the usable capacity and the headroom limit). A
widget keeps only the panels to draw: an edit hands it new panels and asks for a
repaint, which draws a few dozen rectangles and labels — no plot items are made,
kept or updated, and the window starts without a plotting library.
"""

from __future__ import annotations

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QPainter, QPaintEvent, QPalette
from PySide6.QtWidgets import QSizePolicy, QWidget

from engine.estimate import Estimate
from engine.plan import Plan
from gui.views.chart_common import foreground, legend_html, panel_groups
from gui.views.chart_data import Panel, panels
from gui.views.chart_paint import Painted, paint_panel, paint_panels, stage_panel

__all__ = ["LedgerChart", "StageChart", "legend_html", "panel_groups"]

MARGIN = 6.0
"""Pixels between the widget's edge and the drawing."""


class PanelChart(QWidget):
    """Paints ``panels`` side by side; ``painted`` says what its last paint drew."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.panels: tuple[Panel, ...] = ()
        self.units = "gb"
        self.painted: dict[str, Painted] = {}
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        # It fills its own background: a repaint after an edit paints this widget only,
        # not every ancestor's background under it first.
        self.setAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent)

    def sizeHint(self) -> QSize:
        return QSize(640, 300)

    def show_panels(self, found: tuple[Panel, ...], units: str) -> None:
        self.panels, self.units = found, units
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.fillRect(event.rect(), self.palette().color(QPalette.ColorRole.Window))
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        rect = QRectF(self.rect()).adjusted(MARGIN, MARGIN, -MARGIN, -MARGIN)
        self.painted = self._paint(painter, rect)
        painter.end()

    def _paint(self, painter: QPainter, rect: QRectF) -> dict[str, Painted]:
        return paint_panels(painter, rect, self.panels, self.units, foreground())


class LedgerChart(PanelChart):
    """HBM phase timeline, host RAM and NVMe panels side by side."""

    def show_estimate(self, plan: Plan, est: Estimate, units: str) -> None:
        self.show_panels(panels(plan, est), units)


class StageChart(PanelChart):
    """HBM of every pipeline stage at its own peak phase; the heaviest is marked ▲."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.panel: Panel | None = None

    def show_estimate(self, plan: Plan, est: Estimate, units: str) -> None:
        self.panel = stage_panel(plan, est)
        self.show_panels((self.panel,), units)

    def _paint(self, painter: QPainter, rect: QRectF) -> dict[str, Painted]:
        if self.panel is None:
            return {}
        return {"stages": paint_panel(painter, rect, self.panel, self.units, foreground())}
