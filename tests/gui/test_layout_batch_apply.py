"""The Layouts tab keeps a global batch the user set: Apply raises grad_accum instead of
clearing the field, and every row shows its global batch and tokens per step."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt

from engine.layout.shapes import layout_of


def test_apply_keeps_a_typed_global_batch(qtbot: Any, window: Any) -> None:
    """Global batch 32 on the default plan (DP 8, micro-batch 1 → grad_accum 4): every
    offered row runs 32 × 4,096 = 131,072 tokens per step, and after Apply on an
    alternative the field still says 32 (it went back to auto, 32,768 tokens, before)."""
    doc = window.doc
    doc.set_many({"batch.global_batch": 32, "batch.grad_accum": 4}, "global batch 32")
    view = window.workbench.layouts
    qtbot.waitUntil(lambda: view.choice is not None, timeout=60_000)
    header = [view.table.horizontalHeaderItem(c).text() for c in range(view.table.columnCount())]
    col = header.index("Global batch (tokens/step)")
    for i in range(view.table.rowCount()):
        assert view.table.item(i, col).text() == "32 seq × 4,096 = 131,072 tokens/step"
    row = next(i for i, r in enumerate(view.choice.rows) if r.role == "alternative")
    target = view.choice.rows[row].layout
    qtbot.mouseClick(view.apply_buttons[row], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not doc.pending)
    assert layout_of(doc.plan) == target
    assert doc.plan.batch.global_batch == 32
    assert doc.estimate.batch.tokens_per_step == 131_072


def test_a_row_that_moves_the_global_batch_says_so(qtbot: Any, window: Any) -> None:
    """With nothing set the global batch follows DP: a row at another DP is marked, and
    its Apply button's tooltip says by how much (8 → its own)."""
    view = window.workbench.layouts
    qtbot.waitUntil(lambda: view.choice is not None, timeout=60_000)
    col = 4
    moved = [i for i, r in enumerate(view.choice.rows) if r.layout.global_batch != 8]
    assert moved, "the default plan's alternatives include another DP"
    for i in moved:
        assert view.table.item(i, col).text().endswith("changes the plan's")
        assert "changes the global batch 8 →" in view.apply_buttons[i].toolTip()


def test_the_rejections_title_does_not_read_as_gpus(qtbot: Any, window: Any) -> None:
    """ "Rejected layouts at the procurement size: 32" read as 32 GPUs; the title names
    the count of layouts and the procurement size in GPUs apart (the default plan buys a
    partial node of 4)."""
    view = window.workbench.layouts
    qtbot.waitUntil(lambda: view.choice is not None, timeout=60_000)
    title = view.rejected_title.text()
    n = len(view.choice.rejected)
    assert f"{n:,} layout" in title and "of 4 GPUs (the procurement size) rejected" in title
    assert "procurement size:" not in title
