"""The chart's colours: one per ledger group, all distinct, and the capacity lines.

Every group the engine emits has its own colour here (an unknown group still gets a
stable one, by hash, from a reserve that no named group uses), so two groups never
share a swatch in the chart, its legend or the Help guide.
"""

from __future__ import annotations

import zlib

from PySide6.QtGui import QColor

VERDICT_COLORS = {"fits": "#1E8E3E", "straddles": "#C77C02", "does_not_fit": "#C5221F"}
"""The verdict badge's colours on screen (fits, straddles the limit, does not fit)."""

GROUP_COLORS: dict[str, str] = {
    "weights": "#4C78A8",
    "gradients": "#F58518",
    "optimizer": "#54A24B",
    "activations": "#B279A2",
    "logits": "#D6616B",
    "inputs": "#17BECF",
    "buffers": "#BCBD22",
    "gathered": "#72B7B2",
    "buckets": "#EECA3B",
    "temporaries": "#FF9DA6",
    "checkpoint": "#79706E",
    "runtime": "#9D755D",
    "allocator": "#BAB0AC",
    "offload": "#E45756",
    "offload (pinned)": "#8C1C13",
    "processes": "#1F3A93",
}
"""A colour per ledger group (``Row.group``)."""

RESERVE = ("#393B79", "#637939", "#8C6D31", "#843C39", "#7B4173", "#3182BD", "#E6550D")
"""Colours for a group this table does not know yet (none of them is used above)."""

CAPACITY_COLOR = "#D0302F"
LIMIT_COLOR = "#E08E0B"
HEADROOM_FILL = QColor(224, 142, 11, 50)
"""The band between the limit and the capacity: the headroom policy keeps it free."""


def group_color(group: str) -> QColor:
    """A stable colour per ledger group."""
    if group in GROUP_COLORS:
        return QColor(GROUP_COLORS[group])
    return QColor(RESERVE[zlib.crc32(group.encode()) % len(RESERVE)])
