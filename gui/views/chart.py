"""The window's stacked ledger chart, drawn with pyqtgraph.

:func:`draw_panel` draws a :class:`Panel` (bars stacked by ledger group, the low–high
spread hatched on top, the usable capacity and the headroom limit) onto any pyqtgraph
``PlotItem``, updating the items it drew there before. The PDF report draws the same
panels with a bare ``QPainter`` (:mod:`gui.views.chart_paint`), so it never imports
pyqtgraph; the ink, bar geometry and legend both use live in :mod:`gui.views.chart_common`.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtWidgets import QApplication, QWidget

from engine.estimate import Estimate
from engine.plan import Plan
from engine.units import GB, GiB
from gui.views.chart_common import BAR_WIDTH, foreground, legend_html, panel_groups
from gui.views.chart_data import Panel, panels, stage_bars
from gui.views.chart_items import items_with_role, panel_items
from gui.views.chart_scale import note_lines
from gui.views.colors import CAPACITY_COLOR, GROUP_COLORS, LIMIT_COLOR, group_color

__all__ = [
    "BAR_WIDTH",
    "CAPACITY_COLOR",
    "GROUP_COLORS",
    "LIMIT_COLOR",
    "LedgerChart",
    "StageChart",
    "draw_panel",
    "foreground",
    "group_color",
    "items_with_role",
    "legend_html",
    "panel_groups",
    "style_plot",
]


def unit_scale(units: str) -> tuple[int, str]:
    return (GiB, "GiB") if units == "gib" else (GB, "GB")


def draw_panel(plot: pg.PlotItem, panel: Panel, units: str, lines: int = 0) -> None:
    """Draw one panel's stacked bars, spread, capacity and limit onto ``plot``, updating
    the items drawn there before (:mod:`gui.views.chart_items`); ``lines`` pads the note
    under its title."""
    scale, unit = unit_scale(units)
    panel_items(plot).draw(panel, units, foreground(), unit, scale, lines)


def style_plot(plot: pg.PlotItem) -> None:
    fg = foreground()
    for name in ("left", "bottom"):
        axis = plot.getAxis(name)
        axis.setPen(fg)
        axis.setTextPen(fg)
    font = QApplication.font()
    font.setPointSizeF(max(7.0, font.pointSizeF() * 0.85))
    plot.getAxis("bottom").setStyle(tickFont=font)
    plot.getAxis("left").setStyle(tickFont=font)
    plot.showGrid(x=False, y=True, alpha=0.2)
    plot.setMouseEnabled(x=False, y=False)
    plot.hideButtons()
    plot.setMenuEnabled(False)


PANEL_SPACING = 18
"""Pixels between the HBM, host and NVMe panels (a tick label never meets the next
panel's axis title)."""


class LedgerChart(pg.GraphicsLayoutWidget):
    """HBM phase timeline, host RAM and NVMe panels side by side."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setBackground(None)
        self.plots: dict[str, pg.PlotItem] = {}
        self.ci.layout.setHorizontalSpacing(PANEL_SPACING)
        for col, (key, width) in enumerate((("hbm", None), ("host", 230), ("nvme", 175))):
            plot = self.addPlot(row=0, col=col, enableMenu=False)
            style_plot(plot)
            if width is not None:
                plot.setMaximumWidth(width)
            self.plots[key] = plot
        self.panels: tuple[Panel, ...] = ()

    def show_estimate(self, plan: Plan, est: Estimate, units: str) -> None:
        self.panels = panels(plan, est)
        lines = max(len(note_lines(p, units)) for p in self.panels)
        for panel in self.panels:
            draw_panel(self.plots[panel.key], panel, units, lines)


class StageChart(pg.GraphicsLayoutWidget):
    """HBM of every pipeline stage at its own peak phase; the heaviest is marked ▲."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setBackground(None)
        self.plot = self.addPlot(enableMenu=False)
        style_plot(self.plot)
        self.panel: Panel | None = None

    def show_estimate(self, plan: Plan, est: Estimate, units: str) -> None:
        self.panel = Panel(
            "stages",
            f"HBM per rank, each stage at its peak phase (▲ heaviest: stage {est.heaviest_stage})",
            stage_bars(plan, est),
        )
        draw_panel(self.plot, self.panel, units)
