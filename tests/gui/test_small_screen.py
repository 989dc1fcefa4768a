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


def test_the_legend_gets_the_height_its_lines_need(qtbot: Any, window: Any) -> None:
    """At 1280 × 728 the chart legend wraps to three lines; a plain word-wrapped QLabel
    got one line's height from the splitter and painted the other two over the chart's
    phase names. The legend (gui.views.legend_label) now claims its wrapped height."""
    _laptop(qtbot, window)
    legend = window.legend
    line = legend.fontMetrics().lineSpacing()
    assert legend.height() >= 2.5 * line  # three lines at this width, whole
    assert legend.height() >= legend.heightForWidth(legend.width()) - 1
    chart_bottom = window.chart.mapTo(window, window.chart.rect().bottomLeft()).y()
    assert legend.mapTo(window, legend.rect().topLeft()).y() > chart_bottom  # not over it


def test_the_legend_claim_shrinks_when_the_window_widens(qtbot: Any) -> None:
    """The claimed height follows the width both ways: QLabel.heightForWidth never
    answers below a minimum already set, so a claim read from it would only grow."""
    from gui.views.chart_common import legend_html
    from gui.views.legend_label import LegendLabel

    label = LegendLabel()
    qtbot.addWidget(label)
    label.setText(legend_html(["weights", "optimizer", "activations", "logits", "gradients"], True))
    label.show()  # a hidden widget's resize is deferred until it shows
    label.resize(200, 20)
    narrow = label.minimumHeight()
    assert narrow > 3 * label.fontMetrics().lineSpacing()
    label.resize(1600, narrow)
    assert 0 < label.minimumHeight() < narrow
