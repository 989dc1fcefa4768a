"""The comparison chart's verdicts fit their boxes in the report's slot (issue 38: "the
compare window's chart clips in the PDF" — "STRADDLES THE LIMIT" wrapped to two lines in
a one-line box under its bar and both lines were cut)."""

from __future__ import annotations

from typing import Any

import pytest
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QImage, QPainter

from engine.estimate import VERDICT_WORDS
from gui.compare.compare_chart import VERDICT_BOX_HEIGHT, verdict_box, verdict_px
from gui.report.html import CHART_WIDTH
from gui.report.sections.comparison import COMPARISON_CHART_HEIGHT
from gui.views.paint_axes import set_pixel_font


@pytest.mark.parametrize("sides", [2, 3, 4])
def test_every_verdict_fits_under_its_bar(qapp: Any, sides: int) -> None:
    # The peaks panel is the left 42 % of the 640-px chart, less its 64-px axis and 6-px
    # margin: 640 × 0.42 − 70 ≈ 199 px, so two plans get ~100 px each — "STRADDLES THE
    # LIMIT" at 9 px bold is wider than that and takes two lines.
    rect = QRectF(0, 0, CHART_WIDTH, COMPARISON_CHART_HEIGHT)
    panel = QRectF(0, 0, CHART_WIDTH * 0.42, rect.height())
    plot = panel.adjusted(64, 26, -6, -(18 + VERDICT_BOX_HEIGHT + 2))
    slot = plot.width() / sides
    image = QImage(CHART_WIDTH, COMPARISON_CHART_HEIGHT, QImage.Format.Format_ARGB32)
    painter = QPainter(image)
    flags = int(Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop) | int(
        Qt.TextFlag.TextWordWrap
    )
    widest_lines = 0
    for i in range(sides):
        box = verdict_box(plot, i, slot)
        assert box.bottom() <= rect.bottom()
        for words in VERDICT_WORDS.values():
            px = verdict_px(painter, box, words)
            assert px >= 7  # still legible on paper
            set_pixel_font(painter, px, True)
            need = painter.fontMetrics().boundingRect(box.toRect(), flags, words)
            assert need.height() <= box.height() + 1, (words, need.height(), box.height())
            widest_lines = max(
                widest_lines, round(need.height() / painter.fontMetrics().lineSpacing())
            )
    painter.end()
    if sides == 2:
        assert widest_lines == 2  # the case that clipped: it now has its second line
