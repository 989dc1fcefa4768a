"""The plot items of one chart panel, kept and updated instead of recreated.

Recreating every bar, line and label of the three panels on each edit cost ~54 new
pyqtgraph items per redraw (70–80 ms for the default plan, ~160 ms with 16 stages).
:class:`PanelItems` keeps one stacked-bar item per ledger group, one hatched range item,
one item each for the capacity lines, the limit lines and the headroom band (all bars'
segments in one item), and a pool of text labels; a redraw only sets their data. An
item a panel no longer needs is taken off the plot and kept for later.
"""

from __future__ import annotations

from collections.abc import Iterable

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetrics

from gui.views.chart_common import BAR_WIDTH, LABEL_ROOM, LINE_HALF, bar_order
from gui.views.chart_data import Panel
from gui.views.chart_scale import bar_label, note_lines, panel_scale
from gui.views.colors import CAPACITY_COLOR, HEADROOM_FILL, LIMIT_COLOR, group_color


def tag(item: object, role: str) -> None:
    """Name a drawn item's role (tests and the report find bars by it)."""
    item.memplan_role = role  # type: ignore[attr-defined]


def items_with_role(plot: pg.PlotItem, role: str) -> list[object]:
    return [i for i in plot.items if getattr(i, "memplan_role", None) == role]


def _changed(item: object, data: object) -> bool:
    """Whether ``data`` differs from what ``item`` last drew (and remember it): a
    redraw skips the items whose figures did not move."""
    if getattr(item, "memplan_drawn", None) == data:
        return False
    item.memplan_drawn = data  # type: ignore[attr-defined]
    return True


def _pairs(xs: Iterable[int], ys: Iterable[float]) -> tuple[list[float], list[float]]:
    """Segment end points for a ``connect="pairs"`` line: one segment over each bar."""
    px: list[float] = []
    py: list[float] = []
    for x, y in zip(xs, ys, strict=True):
        px += [x - LINE_HALF, x + LINE_HALF]
        py += [y, y]
    return px, py


class PanelItems:
    """Every item drawn on one plot, updated in place by :meth:`draw`."""

    def __init__(self, plot: pg.PlotItem) -> None:
        self.plot = plot
        self.groups: dict[str, pg.BarGraphItem] = {}
        self.labels: list[pg.TextItem] = []
        self.spread = self._bars("range")
        self.band = self._bars("headroom")
        self.limit = pg.PlotDataItem(connect="pairs")
        tag(self.limit, "limit")
        self.capacity = pg.PlotDataItem(connect="pairs")
        tag(self.capacity, "capacity")
        self._ticks: list[tuple[float, str]] | None = None
        self._title: tuple[str, str, str] | None = None
        self._texts: list[tuple[str, str]] = []  # (full, compact) label of each bar
        self._ranges: tuple[int, float] | None = None
        plot.getViewBox().sigResized.connect(lambda *_: self._fit_labels())

    @staticmethod
    def _bars(role: str) -> pg.BarGraphItem:
        item = pg.BarGraphItem(x=[], height=[], width=BAR_WIDTH)
        tag(item, role)
        return item

    def _show(self, item: pg.GraphicsObject, on: bool) -> None:
        """Put ``item`` on the plot or take it off (kept either way)."""
        present = item.scene() is not None and item in self.plot.items
        if on and not present:
            self.plot.addItem(item)
        elif not on and present:
            self.plot.removeItem(item)

    def draw(
        self, panel: Panel, units: str, ink: QColor, unit_name: str, scale: int, lines: int = 0
    ) -> None:
        """Draw ``panel`` (bars stacked by group, spread hatched, capacity and limit);
        its title's note is padded to ``lines`` lines, so panels side by side keep their
        plot areas level."""
        bars = panel.bars
        xs = list(range(len(bars)))
        order = bar_order(panel)
        base = [0.0] * len(bars)
        pen = pg.mkPen(ink, width=0.5)
        for group in order:
            heights = [
                next((s.low for s in bar.segments if s.group == group), 0) / scale for bar in bars
            ]
            item = self.groups.get(group)
            if item is None:
                item = self.groups[group] = self._bars(f"group:{group}")
            if _changed(item, (xs, heights, base, ink.name())):
                item.setOpts(
                    x=xs, height=heights, y0=list(base), width=BAR_WIDTH,
                    brush=group_color(group), pen=pen,
                )  # fmt: skip
            self._show(item, True)
            base = [b + h for b, h in zip(base, heights, strict=True)]
        for group, item in self.groups.items():
            if group not in order:
                self._show(item, False)
        spread = [(bar.high - bar.low) / scale for bar in bars]
        if _changed(self.spread, (xs, spread, base, ink.name())):
            self.spread.setOpts(
                x=xs, height=spread, y0=list(base), width=BAR_WIDTH,
                brush=QBrush(ink, Qt.BrushStyle.BDiagPattern),
                pen=pg.mkPen(ink, width=0.8, style=Qt.PenStyle.DashLine),
            )  # fmt: skip
        self._show(self.spread, any(spread))
        self._lines(panel, scale)
        self._labels(panel, units, ink, scale)
        view = panel_scale(panel)
        self._axis(panel, units, ink, unit_name, view.top / scale)
        notes = note_lines(panel, units)
        notes += ["&nbsp;"] * (lines - len(notes))
        self._set_title(panel.title, "<br>".join(notes), ink)

    def _lines(self, panel: Panel, scale: int) -> None:
        both = [(x, b) for x, b in enumerate(panel.bars) if b.capacity and b.limit is not None]
        caps = [(x, b.capacity / scale) for x, b in enumerate(panel.bars) if b.capacity]
        lims = [(x, (b.limit or 0) / scale, (b.capacity or 0) / scale) for x, b in both]
        if _changed(self.band, lims):
            self.band.setOpts(
                x=[x for x, _, _ in lims], y0=[lo for _, lo, _ in lims],
                height=[cap - lo for _, lo, cap in lims], width=2 * LINE_HALF,
                brush=pg.mkBrush(HEADROOM_FILL), pen=pg.mkPen(None),
            )  # fmt: skip
            if lims:
                self.limit.setData(
                    *_pairs([x for x, _, _ in lims], [lo for _, lo, _ in lims]),
                    pen=pg.mkPen(LIMIT_COLOR, width=1.5, style=Qt.PenStyle.DashLine),
                )
        self._show(self.band, bool(both))
        self._show(self.limit, bool(both))
        if caps and _changed(self.capacity, caps):
            self.capacity.setData(
                *_pairs([x for x, _ in caps], [y for _, y in caps]),
                pen=pg.mkPen(CAPACITY_COLOR, width=2),
            )
        self._show(self.capacity, bool(caps))

    def _labels(self, panel: Panel, units: str, ink: QColor, scale: int) -> None:
        while len(self.labels) < len(panel.bars):
            self.labels.append(pg.TextItem(anchor=(0.5, 1.0)))
        for i, label in enumerate(self.labels):
            if i >= len(panel.bars):
                self._show(label, False)
                continue
            bar = panel.bars[i]
            if _changed(label, (ink.name(), bar.highlight)):
                label.setColor(ink)
                font = QFont(label.textItem.font())
                font.setBold(bar.highlight)
                label.setFont(font)
            y = bar.high / scale
            if label.pos().x() != i or label.pos().y() != y:
                label.setPos(i, y)
            self._show(label, True)
        self._texts = [(bar_label(b, units), bar_label(b, units, compact=True)) for b in panel.bars]
        self._fit_labels()

    def _fit_labels(self) -> None:
        """Each bar's full label ("48.6–57.9") when every one fits the space between
        bars, else the compact one ("57.9", the high end): neighbours never overlap."""
        if not self._texts:
            return
        room = self.plot.getViewBox().width() / max(len(self._texts), 1) * LABEL_ROOM
        metrics = QFontMetrics(QFont(self.labels[0].textItem.font()))
        bold = QFont(self.labels[0].textItem.font())
        bold.setBold(True)
        wide = max(QFontMetrics(bold).horizontalAdvance(full) for full, _ in self._texts)
        use_full = wide <= room or metrics.height() <= 0
        for label, (full, short) in zip(self.labels, self._texts, strict=False):
            text = full if use_full else short
            if label.textItem.toPlainText() != text:
                label.setText(text)

    def _axis(self, panel: Panel, units: str, ink: QColor, unit_name: str, top: float) -> None:
        ticks = [
            (float(x), ("▲ " if b.highlight else "") + b.label) for x, b in enumerate(panel.bars)
        ]
        if ticks != self._ticks:
            self.plot.getAxis("bottom").setTicks([ticks])
            self._ticks = ticks
        axis = self.plot.getAxis("left")
        if axis.labelText != unit_name:
            self.plot.setLabel("left", unit_name)
        ranges = (len(panel.bars), max(top, 1e-9))
        if ranges != self._ranges:
            self._ranges = ranges
            self.plot.setXRange(-0.6, len(panel.bars) - 0.4, padding=0)
            self.plot.setYRange(0, ranges[1], padding=0)

    def _set_title(self, title: str, note: str, ink: QColor) -> None:
        key = (title, note, ink.name())
        if key == self._title:
            return
        self._title = key
        small = f"<br><span style='font-size:8pt'>{note}</span>" if note else ""
        self.plot.setTitle(title + small, color=ink)


def panel_items(plot: pg.PlotItem) -> PanelItems:
    """The items kept for ``plot`` (made on first use)."""
    items = getattr(plot, "memplan_items", None)
    if not isinstance(items, PanelItems):
        items = PanelItems(plot)
        plot.memplan_items = items
    return items
