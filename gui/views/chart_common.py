"""What the painted ledger chart (:mod:`gui.views.chart_paint`) shares with the
window around it: the ink, the bar geometry and the legend under the chart.
"""

from __future__ import annotations

from PySide6.QtGui import QColor, QGuiApplication, QPalette

from gui.views.chart_data import CACHE_LABEL, Panel
from gui.views.colors import CAPACITY_COLOR, LIMIT_COLOR, group_color

BAR_WIDTH = 0.62
"""A bar's width as a share of the space between bar centres."""
LABEL_ROOM = 0.94
"""Share of the space between bar centres a label may take (a gap stays between)."""
LINE_HALF = 0.48
"""Capacity and limit lines span a little more than the bar under them."""

_INK: list[QColor] = []
"""A forced foreground (innermost last) while a chart is drawn for paper."""


def foreground() -> QColor:
    """The chart's text and axis colour: a forced ink, else the application's text."""
    if _INK:
        return _INK[-1]
    if isinstance(QGuiApplication.instance(), QGuiApplication):
        return QGuiApplication.palette().color(QPalette.ColorRole.WindowText)
    return QColor("#202020")


def _entry(swatch: str, text: str) -> str:
    """One legend entry that never breaks inside: non-breaking spaces, and a word joiner
    each side of a dash (Qt's layout breaks after one: "low–" | "high range")."""
    text = text.replace(" ", "&nbsp;").replace("–", "\u2060–\u2060")
    return f"{swatch}&nbsp;{text}"


def legend_html(groups: list[str], spread: bool) -> str:
    """The legend of the ledger groups under the chart: it wraps between entries only,
    never inside one ("limit = capacity − headroom" stays on one line). The releasable
    allocator cache (:data:`CACHE_LABEL`, listed by :func:`panel_groups`) is an outline."""
    parts = [
        _entry(f"<span style='color:{group_color(g).name()}'>■</span>", g)
        for g in groups
        if g != CACHE_LABEL
    ]
    if spread:
        parts.append(_entry("▨", "low–high range"))
    if CACHE_LABEL in groups:
        parts.append(_entry("⬚", CACHE_LABEL))
    parts.append(_entry(f"<span style='color:{CAPACITY_COLOR}'>━</span>", "usable capacity"))
    parts.append(
        _entry(f"<span style='color:{LIMIT_COLOR}'>╍</span>", "limit = capacity − headroom")
    )
    parts.append(_entry("<span style='color:#E08E0B'>▇</span>", "headroom band"))
    return "&nbsp;&nbsp; ".join(parts)


def panel_groups(panels_: tuple[Panel, ...]) -> tuple[list[str], bool]:
    """The ledger groups the panels stack (in first-seen order) and whether any bar has
    a low–high spread: what the legend lists (:data:`CACHE_LABEL` last when a bar
    carries a releasable allocator cache)."""
    groups: list[str] = []
    spread = False
    for panel in panels_:
        for bar in panel.bars:
            spread = spread or bar.high != bar.low
            for seg in bar.segments:
                if seg.group not in groups:
                    groups.append(seg.group)
    if any(bar.cache[1] > 0 for panel in panels_ for bar in panel.bars):
        groups.append(CACHE_LABEL)
    return groups, spread


def bar_order(panel: Panel) -> list[str]:
    """The groups of ``panel`` in stacking order (bottom first)."""
    order: list[str] = []
    for bar in panel.bars:
        order += [s.group for s in bar.segments if s.group not in order]
    return order
