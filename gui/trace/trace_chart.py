"""The trace chart on screen (the Measured tab): :func:`gui.views.trace_paint.draw_trace`
onto a widget, the same drawing the report records for paper — with, above it, the
allocator replay's reserved peak beside the traced allocated peak (a trace's reserved is
simulated: ``engine/trace/reserved.py``)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QPainter, QPaintEvent
from PySide6.QtWidgets import QWidget

from engine.trace.compare import Comparison
from engine.trace.reserved import TraceReplay
from engine.units import fmt_bytes
from gui.views.trace_paint import draw_trace

CAPTION_HEIGHT = 16.0
"""Room for the one-line allocated / reserved caption above the chart (px)."""


def caption(cmp: Comparison, replayed: TraceReplay | None, units: str) -> str:
    """Allocated and reserved side by side, as the chart's caption."""
    u: Any = units  # the chart's units are already a UnitChoice string
    allocated = f"Allocated (traced) {fmt_bytes(cmp.peak.traced, u)}"
    if replayed is None:
        return f"{allocated} · reserved: not replayed (a record from before the replay)"
    r = replayed.result
    share = 100 * replayed.over_allocated / r.peak_allocated if r.peak_allocated else 0.0
    return (
        f"{allocated} · reserved (allocator replay) {fmt_bytes(r.peak_reserved, u)} · "
        f"reserved − allocated {fmt_bytes(replayed.over_allocated, u)} ({share:.1f} %) · "
        f"{len(replayed.streams)} stream(s), expandable_segments "
        f"{'on' if replayed.expandable_segments else 'off'}"
    )


class TraceChart(QWidget):
    """The trace chart on screen (the Measured tab)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("traceChart")
        self.setMinimumHeight(150)
        self.comparison: Comparison | None = None
        self.replayed: TraceReplay | None = None
        self.units = "gb"

    def show_comparison(
        self, cmp: Comparison | None, units: str, replayed: TraceReplay | None = None
    ) -> None:
        self.comparison, self.units, self.replayed = cmp, units, replayed
        self.setVisible(cmp is not None)
        self.setToolTip("" if cmp is None else caption(cmp, replayed, units))
        self.update()

    def caption(self) -> str:
        """The caption drawn above the chart ("" with nothing to show)."""
        if self.comparison is None:
            return ""
        return caption(self.comparison, self.replayed, self.units)

    def paintEvent(self, event: QPaintEvent) -> None:
        if self.comparison is None:
            return
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        rect = QRectF(self.rect()).adjusted(4, 2, -4, -2)
        top = QRectF(rect.left(), rect.top(), rect.width(), CAPTION_HEIGHT)
        painter.drawText(
            top, int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter), self.caption()
        )
        body = rect.adjusted(0, CAPTION_HEIGHT + 2, 0, 0)
        draw_trace(painter, body, self.comparison, self.units)
        painter.end()
