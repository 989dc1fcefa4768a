"""How tall a chart panel's axis is, and what its capacity note says (free of Qt).

A host-RAM or NVMe bar on an axis scaled to a 2 TB or 30 TB capacity is a sliver no
one can read. So a panel's axis reaches its tallest bar (with room for the label) and
only those capacities that are within :data:`CAPACITY_IN_VIEW_RATIO` of it; a larger
capacity is left off the axis and named in the panel's note with "↑ above the axis".
Every capacity and limit a panel draws is named in that note too, under the panel's
title, where no bar label can collide with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.units import GB, GiB
from gui.views.chart_data import Bar, Panel

CAPACITY_IN_VIEW_RATIO = 3.0
"""A capacity up to this multiple of the tallest bar stays on the axis (the bar is then
at least a third of the axis tall); a larger one is named, not drawn."""

TOP_PAD = 1.12
"""Axis top over the tallest thing drawn: room for the bar's label above it."""


@dataclass(frozen=True, slots=True)
class PanelScale:
    """The axis top (bytes) and which bars' capacities are above it."""

    top: float
    off_scale: frozenset[int]  # bar indices whose capacity line is above the axis


def panel_scale(panel: Panel) -> PanelScale:
    """The axis of ``panel``: its tallest bar, and the capacities near enough to it."""
    tallest = max((b.reserved_high for b in panel.bars), default=0)
    caps = [(i, b.capacity) for i, b in enumerate(panel.bars) if b.capacity]
    if tallest <= 0:  # nothing to read: show the capacity as before
        largest = max((c for _, c in caps), default=1)
        return PanelScale(largest * TOP_PAD, frozenset())
    near = [c for _, c in caps if c <= tallest * CAPACITY_IN_VIEW_RATIO]
    top = max([tallest, *near]) * TOP_PAD
    off = frozenset(i for i, c in caps if c > top)
    return PanelScale(top, off)


def _amount(n: int, units: str) -> str:
    scale, unit = (GiB, "GiB") if units == "gib" else (GB, "GB")
    value = n / scale
    return f"{value:,.0f} {unit}" if value >= 100 else f"{value:,.1f} {unit}"


def capacity_note(panel: Panel, scale: PanelScale, units: str) -> list[str]:
    """The capacities and limits of ``panel`` in words, one line each, for the note under
    its title: one line when every bar shares them ("usable 84.9 GB · limit 76.4 GB"),
    else a line per bar ("Rank share 275 GB", "Node 2,199 GB ↑ above the axis")."""
    bars = [b for b in panel.bars if b.capacity]
    if not bars:
        return []
    shared = len({(b.capacity, b.limit) for b in bars}) == 1
    parts: list[str] = []
    for i, bar in enumerate(panel.bars):
        if not bar.capacity:
            continue
        above = " ↑ off the axis" if i in scale.off_scale else ""
        name = ("usable" if bar.limit is not None else "capacity") if shared else bar.label
        parts.append(_bar_note(bar, units, name) + above)
        if shared:
            break
    return parts


def _bar_note(bar: Bar, units: str, name: str) -> str:
    assert bar.capacity is not None
    text = f"{name} {_amount(bar.capacity, units)}"
    if bar.limit is not None:
        text += f" · limit {_amount(bar.limit, units)}"
    return text


def bar_label(bar: Bar, units: str, compact: bool = False) -> str:
    """The figure over a bar: its low–high total in the axis unit (the axis names it);
    ``compact`` gives the high end alone (where the bars are too close for ranges)."""
    scale = GiB if units == "gib" else GB
    lo, hi = bar.low / scale, bar.high / scale
    if compact or bar.low == bar.high:
        return f"{hi:,.1f}"
    return f"{lo:,.1f}–{hi:,.1f}"


def note_lines(panel: Panel, units: str) -> list[str]:
    """The lines under a panel's title: its own note, then its capacities."""
    return [t for t in (panel.note,) if t] + capacity_note(panel, panel_scale(panel), units)
