"""The figure over a bar stays out of its bar's drawing and inside its own slot.

Seen under Xvfb at 1366×768: the HBM phase panel is ~370 px wide, five bars, and the
short Steady / Checkpoint bars (14.1 GB under an ~8 GB releasable allocator cache) had
their "14.1" written inside the dotted cache outline, on its hatch, because the label
was placed over the bar's high end rather than over everything drawn for the bar
(:func:`gui.views.chart_paint._labels`). With 16 pipeline stages in a narrow pane a
label wider than its slot was written across its neighbours.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from PySide6.QtCore import QRectF
from PySide6.QtGui import QColor, QImage, QPainter

from engine.units import GB
from gui.views.chart_common import LABEL_ROOM
from gui.views.chart_data import Bar, Panel, Segment
from gui.views.chart_paint import AXIS_ROOM, Painted, paint_panel

PHASES = ("Steady", "Forward", "Backward", "Optimizer", "Checkpoint")


def _paint(panel: Panel, width: int, height: int = 290) -> Painted:
    image = QImage(width, height, QImage.Format.Format_ARGB32)
    image.fill(QColor("white"))
    painter = QPainter(image)
    try:
        return paint_panel(painter, QRectF(0, 0, width, height), panel, "gb", QColor("black"))
    finally:
        painter.end()


def _phase_panel() -> Panel:
    """The window's default plan, rounded: 12 GB states with a 2.1 GB spread and an
    8 GB releasable cache in the steady and checkpoint phases, ~50 GB at the peak."""
    highs = (12, 45, 47, 18, 12)
    bars = tuple(
        Bar(
            name,
            (Segment("weights", h * GB, (h + 2) * GB),),
            capacity=85 * GB,
            limit=85 * GB,
            highlight=name == "Backward",
            cache=(8 * GB, 8 * GB),
        )
        for name, h in zip(PHASES, highs, strict=True)
    )
    return Panel("hbm", "HBM per rank by phase", bars)


def test_a_figure_sits_over_the_cache_outline_not_inside_it(qapp: Any) -> None:
    # 370 px wide: slot = (370 − 62) / 5 = 61.6 px; "12.0–14.0" at 11 px bold is wider
    # than 0.94 × 61.6 = 57.9 px, so every figure is the high end alone ("14.0"), ~25 px.
    panel = _phase_panel()
    drawn = _paint(panel, 370)
    slot = (370 - AXIS_ROOM) / len(panel.bars)
    assert len(drawn.labels) == len(panel.bars)
    for i, (bar, box) in enumerate(zip(panel.bars, drawn.labels, strict=True)):
        assert box is not None, bar.label
        outline_top = drawn.axis.y(bar.reserved_high)  # 14 + 8 = 22 GB for Steady
        assert box.bottom() <= outline_top, (bar.label, box.bottom(), outline_top)
        left = AXIS_ROOM + i * slot
        assert left <= box.left() and box.right() <= left + slot


def test_a_figure_wider_than_its_slot_is_left_out(qapp: Any) -> None:
    # 16 stages in 300 px: slot = (300 − 62) / 16 ≈ 14.9 px, room 0.94 × 14.9 ≈ 14 px;
    # "16.0" at 11 px bold is ~26 px: written, it would cover both neighbours' figures.
    bars = tuple(
        Bar(f"Stage {i}", (Segment("weights", 16 * GB, 16 * GB),), highlight=i == 15)
        for i in range(16)
    )
    drawn = _paint(Panel("stages", "HBM per rank", bars), 300)
    assert drawn.labels == (None,) * 16


def test_figures_that_fit_keep_their_slot(qapp: Any) -> None:
    # The same 16 stages in 1,200 px: slot ≈ 71 px, room ≈ 66.8 px — every figure drawn,
    # each box inside its slot and clear of its neighbours' boxes.
    bars = tuple(Bar(f"Stage {i}", (Segment("weights", 14 * GB, 18 * GB),)) for i in range(16))
    drawn = _paint(Panel("stages", "HBM per rank", bars), 1200)
    boxes = [b for b in drawn.labels if b is not None]
    assert len(boxes) == 16
    slot = (1200 - AXIS_ROOM) / 16
    for a, b in pairwise(boxes):
        assert a.right() <= b.left()
        assert a.width() <= slot * LABEL_ROOM + 1e-9
