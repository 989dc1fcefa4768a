"""The stacked ledger chart: one drawing routine shared by the window and the report.

:func:`draw_panel` draws a :class:`Panel` (bars stacked by ledger group, the low–high
spread hatched on top, the usable capacity and the headroom limit) onto any pyqtgraph
``PlotItem``; :func:`render_estimate` draws the whole chart with a ``QPainter`` for the
PDF report, so screen and paper use the same code.
"""

from __future__ import annotations

import zlib

import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QPainter, QPalette
from PySide6.QtWidgets import QApplication, QWidget
from shiboken6 import delete

from engine.estimate import Estimate
from engine.plan import Plan
from engine.units import GB, GiB
from gui.views.chart_data import Bar, Panel, panels, stage_bars

_INK: list[QColor] = []
"""A forced foreground (innermost last) while a chart is drawn for paper."""

GROUP_COLORS = {
    "weights": "#4C78A8",
    "gradients": "#F58518",
    "optimizer": "#54A24B",
    "activations": "#B279A2",
    "gathered": "#72B7B2",
    "buckets": "#EECA3B",
    "temporaries": "#FF9DA6",
    "runtime": "#9D755D",
    "allocator": "#BAB0AC",
    "offload": "#E45756",
    "checkpoint": "#79706E",
}
_FALLBACK = ("#1F77B4", "#AEC7E8", "#98DF8A", "#C5B0D5", "#C49C94", "#F7B6D2", "#DBDB8D")
CAPACITY_COLOR = "#D0302F"
LIMIT_COLOR = "#E08E0B"
BAR_WIDTH = 0.62


def _tag(item: object, role: str) -> None:
    """Name a drawn item's role (tests and the report find bars by it)."""
    item.memplan_role = role  # type: ignore[attr-defined]


def items_with_role(plot: pg.PlotItem, role: str) -> list[object]:
    return [i for i in plot.items if getattr(i, "memplan_role", None) == role]


def group_color(group: str) -> QColor:
    """A stable colour per ledger group; unknown groups get a fixed fallback colour."""
    if group in GROUP_COLORS:
        return QColor(GROUP_COLORS[group])
    return QColor(_FALLBACK[zlib.crc32(group.encode()) % len(_FALLBACK)])


def unit_scale(units: str) -> tuple[int, str]:
    return (GiB, "GiB") if units == "gib" else (GB, "GB")


def foreground() -> QColor:
    if _INK:
        return _INK[-1]
    app = QApplication.instance()
    if isinstance(app, QApplication):
        return app.palette().color(QPalette.ColorRole.WindowText)
    return QColor("#202020")


def draw_panel(plot: pg.PlotItem, panel: Panel, units: str, legend: bool = False) -> None:
    """Draw one panel's stacked bars, spread, capacity and limit onto ``plot``."""
    scale, unit = unit_scale(units)
    fg = foreground()
    if plot.legend is not None:
        plot.legend.clear()
    plot.clear()
    if legend and plot.legend is None:
        plot.addLegend(offset=(8, 8), labelTextColor=fg, brush=pg.mkBrush(None))
    bars = panel.bars
    xs = list(range(len(bars)))
    groups: list[str] = []
    for bar in bars:
        for seg in bar.segments:
            if seg.group not in groups:
                groups.append(seg.group)
    base = [0.0] * len(bars)
    for group in groups:
        heights = []
        for bar in bars:
            found = next((s for s in bar.segments if s.group == group), None)
            heights.append(found.low / scale if found else 0.0)
        item = pg.BarGraphItem(
            x=xs,
            height=heights,
            y0=list(base),
            width=BAR_WIDTH,
            brush=group_color(group),
            pen=pg.mkPen(fg, width=0.5),
            name=group if legend else None,
        )
        _tag(item, f"group:{group}")
        plot.addItem(item)
        base = [b + h for b, h in zip(base, heights, strict=True)]
    spread = [(bar.high - bar.low) / scale for bar in bars]
    if any(spread):
        hatch = QBrush(fg, Qt.BrushStyle.BDiagPattern)
        item = pg.BarGraphItem(
            x=xs,
            height=spread,
            y0=list(base),
            width=BAR_WIDTH,
            brush=hatch,
            pen=pg.mkPen(fg, width=0.8, style=Qt.PenStyle.DashLine),
            name="low–high range" if legend else None,
        )
        _tag(item, "range")
        plot.addItem(item)
    top = 0.0
    for x, bar in enumerate(bars):
        _limits(plot, x, bar, scale, unit)
        total = bar.high / scale
        label = f"{bar.low / scale:,.1f}–{total:,.1f}" if bar.low != bar.high else f"{total:,.1f}"
        text = pg.TextItem(f"{label} {unit}", color=fg, anchor=(0.5, 1.0))
        font = text.textItem.font()
        font.setBold(bar.highlight)
        text.setFont(font)
        text.setPos(x, total)
        plot.addItem(text)
        top = max(top, total, (bar.capacity or 0) / scale)
    axis = plot.getAxis("bottom")
    ticks = [(x, ("▲ " if b.highlight else "") + b.label) for x, b in enumerate(bars)]
    axis.setTicks([ticks])
    plot.setLabel("left", unit)
    plot.setTitle(
        panel.title
        + (f"<br><span style='font-size:8pt'>{panel.note}</span>" if panel.note else ""),
        color=fg,
    )
    plot.setXRange(-0.6, len(bars) - 0.4, padding=0)
    plot.setYRange(0, max(top, 1e-9) * 1.12, padding=0)


def _limits(plot: pg.PlotItem, x: int, bar: Bar, scale: int, unit: str) -> None:
    """Usable capacity (solid) and headroom limit (dashed) over one bar, band between."""
    half = 0.48
    if bar.limit is not None and bar.capacity is not None:
        band = pg.FillBetweenItem(
            pg.PlotDataItem([x - half, x + half], [bar.limit / scale] * 2),
            pg.PlotDataItem([x - half, x + half], [bar.capacity / scale] * 2),
            brush=pg.mkBrush(QColor(224, 142, 11, 50)),
        )
        _tag(band, "headroom")
        plot.addItem(band)
        limit = pg.PlotDataItem(
            [x - half, x + half],
            [bar.limit / scale] * 2,
            pen=pg.mkPen(LIMIT_COLOR, width=1.5, style=Qt.PenStyle.DashLine),
        )
        _tag(limit, "limit")
        plot.addItem(limit)
    if bar.capacity is not None:
        cap = pg.PlotDataItem(
            [x - half, x + half], [bar.capacity / scale] * 2, pen=pg.mkPen(CAPACITY_COLOR, width=2)
        )
        _tag(cap, "capacity")
        plot.addItem(cap)
        if x == 0:
            amount = bar.capacity / scale
            scale_unit = f"{amount:,.0f} {unit}" if amount >= 100 else f"{amount:,.1f} {unit}"
            word = "usable " if bar.limit is not None else ""
            tag = pg.TextItem(f"{word}{scale_unit}", color=CAPACITY_COLOR, anchor=(0, 1))
            tag.setPos(x - half, bar.capacity / scale)
            plot.addItem(tag)


def legend_html(groups: list[str], spread: bool) -> str:
    """A one-line HTML legend of the ledger groups (shown under the chart)."""
    parts = [f"<span style='color:{group_color(g).name()}'>■</span>&nbsp;{g}" for g in groups]
    if spread:
        parts.append("▨&nbsp;low–high range")
    parts.append(f"<span style='color:{CAPACITY_COLOR}'>━</span>&nbsp;usable capacity")
    parts.append(
        f"<span style='color:{LIMIT_COLOR}'>╍</span>&nbsp;limit (capacity less "
        "headroom; shaded band = headroom)"
    )
    return "&nbsp;&nbsp;&nbsp;".join(parts)


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


class LedgerChart(pg.GraphicsLayoutWidget):
    """HBM phase timeline, host RAM and NVMe panels side by side."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setBackground(None)
        self.plots: dict[str, pg.PlotItem] = {}
        for col, (key, width) in enumerate((("hbm", None), ("host", 210), ("nvme", 150))):
            plot = self.addPlot(row=0, col=col)
            style_plot(plot)
            if width is not None:
                plot.setMaximumWidth(width)
            self.plots[key] = plot
        self.panels: tuple[Panel, ...] = ()

    def show_estimate(self, plan: Plan, est: Estimate, units: str) -> None:
        self.panels = panels(plan, est)
        for panel in self.panels:
            draw_panel(self.plots[panel.key], panel, units)


class StageChart(pg.GraphicsLayoutWidget):
    """HBM of every pipeline stage at its own peak phase; the heaviest is marked ▲."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setBackground(None)
        self.plot = self.addPlot()
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
        chart.show_estimate(plan, est, units)
        render_chart(chart, painter, target, width, height)
        delete(chart)  # now, not at exit: a view outliving QApplication crashes
    finally:
        _INK.pop()


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
    _render(LedgerChart(), plan, est, units, painter, target, width, height, ink)


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
    _render(StageChart(), plan, est, units, painter, target, width, height, ink)
