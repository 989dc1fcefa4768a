"""The toolbar's Undo and Redo: twins of the Edit menu's actions with a fixed word."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QToolBar


def _button_actions(window: Any) -> dict[str, Any]:
    bar = window.findChild(QToolBar, "mainToolbar")
    return {a.text(): a for a in bar.actions() if a.text()}


def test_toolbar_undo_follows_the_menu_and_undoes_the_document(qtbot: Any, window: Any) -> None:
    acts = _button_actions(window)
    undo, redo = acts["Undo"], acts["Redo"]
    assert not undo.isEnabled() and not redo.isEnabled()
    before = window.doc.plan.batch.seq_len
    window.doc.set("batch.seq_len", 2048, merge=False)
    window.doc.flush()
    assert undo.isEnabled() and window.undo_action.text() != "&Undo"
    assert undo.text() == "Undo"  # the menu names the step; the button keeps its word
    undo.trigger()
    assert window.doc.plan.batch.seq_len == before
    assert redo.isEnabled() and not undo.isEnabled()
    redo.trigger()
    assert window.doc.plan.batch.seq_len == 2048
