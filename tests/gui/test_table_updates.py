"""The ledger table follows an edit without a model reset when the rows stay the same:
the moved cells change, the selection and the scroll position stay."""

from __future__ import annotations

from typing import Any

from gui.views.table import COLUMNS


def test_an_edit_updates_cells_and_keeps_selection_and_scroll(qtbot: Any, window: Any) -> None:
    table = window.table
    resets: list[int] = []
    table.ledger.modelReset.connect(lambda: resets.append(1))
    table.selectRow(3)
    selected = table.proxy.mapToSource(table.currentIndex()).row()
    bar = table.verticalScrollBar()
    bar.setValue(bar.maximum())
    scrolled = bar.value()
    bytes_col = COLUMNS.index("Bytes")
    before = [table.ledger.index(r, bytes_col).data() for r in range(len(table.ledger.rows))]
    window.doc.set("batch.seq_len", 8192, merge=False)
    qtbot.waitUntil(lambda: not window.doc.pending)
    after = [table.ledger.index(r, bytes_col).data() for r in range(len(table.ledger.rows))]
    assert after != before and len(after) == len(before)  # activations moved
    assert not resets
    assert table.proxy.mapToSource(table.currentIndex()).row() == selected
    assert bar.value() == scrolled


def test_other_rows_reset_the_model(qtbot: Any, window: Any) -> None:
    """Offloading the optimizer adds host rows: a new row set resets the model."""
    resets: list[int] = []
    window.table.ledger.modelReset.connect(lambda: resets.append(1))
    n = len(window.table.ledger.rows)
    window.doc.set_many({"parallelism.strategy": "zero3", "offload.optimizer": "cpu"}, "offload")
    qtbot.waitUntil(lambda: not window.doc.pending)
    assert resets and len(window.table.ledger.rows) != n
    assert window.table.proxy.rowCount() == len(window.table.ledger.rows)
