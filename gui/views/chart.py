"""The stacked ledger chart: one drawing routine shared by the window and the report.

:func:`draw_panel` draws a :class:`Panel` (bars stacked by ledger group, the low–high
spread hatched on top, the usable capacity and the headroom limit) onto any pyqtgraph
``PlotItem``, updating the items it drew there before; :func:`render_estimate` draws the
whole chart with a ``QPainter`` for the PDF report, so screen and paper use the same
code. The report keeps one hidden chart per kind for the application's life (building
three plots costs more than drawing them), deleted when the application quits.
"""

from __future__ import annotations

import atexit

import pyqtgraph as pg
from PySide6.QtCore import QRectF
from PySide6.QtGui import QColor, QPainter, QPalette
from PySide6.QtWidgets import QApplication, QWidget
from shiboken6 import delete

from engine.estimate import Estimate
from engine.plan import Plan
from engine.units import GB, GiB
from gui.views.chart_data import Panel, panels, stage_bars
from gui.views.chart_items import BAR_WIDTH, items_with_role, note_lines, panel_items
from gui.views.colors import CAPACITY_COLOR, GROUP_COLORS, LIMIT_COLOR, group_color

_INK: list[QColor] = []
"""A forced foreground (innermost last) while a chart is drawn for paper."""

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
    "render_estimate",
    "render_stages",
    "style_plot",
]


def unit_scale(units: str) -> tuple[int, str]:
    return (GiB, "GiB") if units == "gib" else (GB, "GB")


def foreground() -> QColor:
    if _INK:
        return _INK[-1]
    app = QApplication.instance()
    if isinstance(app, QApplication):
        return app.palette().color(QPalette.ColorRole.WindowText)
    return QColor("#202020")


def draw_panel(plot: pg.PlotItem, panel: Panel, units: str, lines: int = 0) -> None:
    """Draw one panel's stacked bars, spread, capacity and limit onto ``plot``, updating
    the items drawn there before (:mod:`gui.views.chart_items`); ``lines`` pads the note
    under its title."""
    scale, unit = unit_scale(units)
    panel_items(plot).draw(panel, units, foreground(), unit, scale, lines)


def _entry(swatch: str, text: str) -> str:
    """One legend entry that never breaks inside: non-breaking spaces, and a word joiner
    each side of a dash (Qt's layout breaks after one: "low–" | "high range")."""
    text = text.replace(" ", "&nbsp;").replace("–", "\u2060–\u2060")
    return f"{swatch}&nbsp;{text}"


def legend_html(groups: list[str], spread: bool) -> str:
    """The legend of the ledger groups under the chart: it wraps between entries only,
    never inside one ("limit = capacity − headroom" stays on one line)."""
    parts = [_entry(f"<span style='color:{group_color(g).name()}'>■</span>", g) for g in groups]
    if spread:
        parts.append(_entry("▨", "low–high range"))
    parts.append(_entry(f"<span style='color:{CAPACITY_COLOR}'>━</span>", "usable capacity"))
    parts.append(
        _entry(f"<span style='color:{LIMIT_COLOR}'>╍</span>", "limit = capacity − headroom")
    )
    parts.append(_entry("<span style='color:#E08E0B'>▇</span>", "headroom band"))
    return "&nbsp;&nbsp; ".join(parts)


def panel_groups(panels_: tuple[Panel, ...]) -> tuple[list[str], bool]:
    groups: list[str] = []
    spread = False
    for panel in panels_:
        for bar in panel.bars:
            spread = spread or bar.high != bar.low
            for seg in bar.segments:
                if seg.group not in groups:
                    groups.append(seg.group)
    return groups, spread


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


def render_chart(
    chart: pg.GraphicsLayoutWidget, painter: QPainter, target: QRectF, width: int, height: int
) -> None:
    """Lay out a hidden chart at ``width`` × ``height`` and draw its scene into ``target``.

    A widget that was never shown gets no resize event, so the view and its layout are
    sized by hand before the scene is drawn (vector on a PDF or SVG painter).
    """
    chart.resize(width, height)
    chart.resizeEvent(None)
    chart.ci.layout.activate()
    QApplication.processEvents()
    chart.scene().prepareForPaint()
    chart.scene().render(painter, target, QRectF(0, 0, width, height))


def _render(
    chart: LedgerChart | StageChart,
    plan: Plan,
    est: Estimate,
    units: str,
    painter: QPainter,
    target: QRectF,
    width: int,
    height: int,
    ink: QColor | None,
) -> None:
    _INK.append(ink or foreground())
    try:
        for plot in chart_plots(chart):
            style_plot(plot)  # the forced ink: axes and ticks as on paper
        chart.show_estimate(plan, est, units)
        render_chart(chart, painter, target, width, height)
    finally:
        _INK.pop()


def chart_plots(chart: LedgerChart | StageChart) -> list[pg.PlotItem]:
    return list(chart.plots.values()) if isinstance(chart, LedgerChart) else [chart.plot]


_PAPER: dict[str, LedgerChart | StageChart] = {}
"""The hidden charts the report draws with, made once (see the module docstring)."""


def paper_chart(kind: str) -> LedgerChart | StageChart:
    """The report's hidden chart of ``kind`` ("ledger" or "stages")."""
    chart = _PAPER.get(kind)
    if chart is None:
        chart = _PAPER[kind] = LedgerChart() if kind == "ledger" else StageChart()
        app = QApplication.instance()
        if app is not None:  # a view outliving QApplication crashes: delete it first
            app.aboutToQuit.connect(lambda k=kind: _drop_paper(k))
            atexit.register(_drop_paper, kind)  # an application that never quits (tests)
    return chart


def _drop_paper(kind: str) -> None:
    chart = _PAPER.pop(kind, None)
    if chart is not None:
        delete(chart)


def render_estimate(
    plan: Plan,
    est: Estimate,
    units: str,
    painter: QPainter,
    target: QRectF,
    width: int = 1000,
    height: int = 360,
    ink: QColor | None = None,
) -> None:
    """Draw the ledger chart with ``painter`` into ``target`` (for the PDF report);
    ``ink`` forces the text and axis colour (dark on paper whatever the screen theme)."""
    _render(paper_chart("ledger"), plan, est, units, painter, target, width, height, ink)


def render_stages(
    plan: Plan,
    est: Estimate,
    units: str,
    painter: QPainter,
    target: QRectF,
    width: int = 1000,
    height: int = 300,
    ink: QColor | None = None,
) -> None:
    """Draw the per-stage chart (PP > 1) like :func:`render_estimate`."""
    _render(paper_chart("stages"), plan, est, units, painter, target, width, height, ink)
