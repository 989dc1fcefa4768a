"""At 1366 × 768 (the window fits the screen at 1280 × 728, gui.screen_fit) the straddle
verdict no longer wraps to six lines and the ledger's Bytes column is not cut
mid-number (issue 38). Looked at under Xvfb: the badge reads "STRADDLES / THE LIMIT"
on two lines, the panel's figures take at most four, and Bytes ends inside the view."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QApplication

from gui.views.table import BYTES, COLUMNS, LedgerModel
from gui.views.verdict import BADGE_MAX_WIDTH

# The default plan at 8,192 tokens per sequence straddles: its range 82.92–91.14 GB
# holds the limit 84.93 GB (engine.verdict.judge).
STRADDLE = {"batch.seq_len": 8192}


def _laptop(qtbot: Any, window: Any) -> None:
    window.resize(1280, 728)
    window.doc.set_many(STRADDLE, "seq 8192")
    qtbot.waitUntil(lambda: window.doc.estimate.verdict == "straddles", timeout=30_000)
    for _ in range(5):
        QApplication.processEvents()


def test_the_straddle_verdict_stays_short(qtbot: Any, window: Any) -> None:
    _laptop(qtbot, window)
    panel = window.verdict
    assert panel.badge.width() <= BADGE_MAX_WIDTH
    line = panel.fontMetrics().lineSpacing()
    for key, label in panel.values.items():
        if key != "counts":  # the counts say three things, one line each
            assert label.height() <= 4.5 * line, (key, label.height() / line)
    assert panel.badge.toolTip() == window.doc.estimate.verdict_reason  # the detail


def test_the_bytes_column_is_whole(qtbot: Any, window: Any) -> None:
    _laptop(qtbot, window)
    table = window.table
    head = table.horizontalHeader()
    right = head.sectionViewportPosition(BYTES) + head.sectionSize(BYTES)
    assert right <= table.viewport().width()
    rows = window.doc.estimate.heaviest.rows
    widest = max(table.fontMetrics().horizontalAdvance(LedgerModel._text(r, "Bytes")) for r in rows)
    assert head.sectionSize(BYTES) >= widest
    assert COLUMNS[BYTES] == "Bytes"
