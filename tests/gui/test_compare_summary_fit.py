"""The Compare window's figures: every row on screen, every figure whole.

Seen under Xvfb at 1366×768 (the window opens at 1180×706) and at 1920×1080 (1180×720):
the figures got the splitter's 2 : 3 share, ~227 px for twelve 30-px rows, so 7½ rows
showed and the last row on screen — "Procure (first legal layout)", whose text "4 GPUs:
a partial node (4 of 8 per node; below one node a purchase rounds up to 1, 2, 4 GPUs)"
is the longest — was cut across the middle and ended in "below on…".
"""

from __future__ import annotations

from typing import Any

import pytest
from PySide6.QtCore import QRect, Qt
from PySide6.QtWidgets import QApplication, QStyle

from engine.plan import default_plan, with_value
from engine.whatif.compare import SUMMARY_FIGURES, compare
from gui.compare.compare_window import CompareWindow

LAPTOP_WINDOW = (1180, 706)
"""The window's opening size on a 1366×768 screen: 1180 wide, 92 % of 768 tall."""


@pytest.mark.parametrize("sides", [2, 3])
def test_every_figure_is_on_screen_and_whole(
    qtbot: Any, monkeypatch: pytest.MonkeyPatch, sides: int
) -> None:
    base = default_plan()
    plans = [("on screen", base), ("seq 2048", with_value(base, "batch.seq_len", 2048))]
    plans += [("micro 2", with_value(base, "batch.micro_batch", 2))][: sides - 2]
    c = compare(plans)  # with the GPU counts: the "Procure" line is the long one
    monkeypatch.setattr(CompareWindow, "run", lambda self: None)  # no worker: c is shown
    cw = CompareWindow(plans, "gb")
    qtbot.addWidget(cw)
    cw.resize(*LAPTOP_WINDOW)
    cw.show()
    qtbot.waitExposed(cw)
    cw.show_result(c)
    QApplication.processEvents()
    table = cw.summary
    assert table.rowCount() == len(SUMMARY_FIGURES) == 12
    view = table.viewport().height()
    last = table.rowCount() - 1
    assert table.rowViewportPosition(last) + table.rowHeight(last) <= view  # no row cut
    margin = table.style().pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, table) + 1
    longest = ""
    for r in range(table.rowCount()):
        for col in range(table.columnCount()):
            text = table.item(r, col).text()
            room = table.columnWidth(col) - 2 * margin
            metrics = table.fontMetrics()
            if metrics.horizontalAdvance(text) > room:  # one line cannot hold it: wraps
                assert table.wordWrap(), text
                longest = max(longest, text, key=len)
            flags = int(Qt.TextFlag.TextWordWrap)
            need = metrics.boundingRect(QRect(0, 0, room, 10_000), flags, text).height()
            assert need <= table.rowHeight(r), (text, need, table.rowHeight(r))
            assert table.item(r, col).toolTip() == text
    assert longest.startswith("4 GPUs: a partial node")  # the figure that was cut
