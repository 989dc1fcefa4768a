"""Fields commit whole values; an invalid one keeps the last valid estimate with a
banner and the message at the field; Ctrl+Z in a field undoes the document's edit."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QLineEdit

from engine.plan import default_plan

LAYERS = "model.architecture.layers"


def _editor(win: Any, path: str) -> QLineEdit:
    for page in win.tabs.values():
        if path in page.bindings:
            edit = page.bindings[path].editor
            assert isinstance(edit, QLineEdit)
            return edit
    raise KeyError(path)


def _binding(win: Any, path: str) -> Any:
    return next(p.bindings[path] for p in win.tabs.values() if path in p.bindings)


def retype(qtbot: Any, win: Any, path: str, text: str) -> QLineEdit:
    """Clear the field and type ``text`` key by key (as fast as a user can)."""
    edit = _editor(win, path)
    win.go_to_field(path)
    edit.selectAll()
    qtbot.keyClick(edit, Qt.Key.Key_Backspace)
    qtbot.keyClicks(edit, text)
    return edit


def test_typing_never_commits_a_prefix(qtbot: Any, window: Any) -> None:
    """Typing 1e15 in Layers passes through "1" (a valid one-layer model): nothing is
    committed while typing, and the whole text, once finished, is refused — the plan keeps
    its 32 layers and the estimate on screen is the last valid one."""
    seen: list[int] = []
    window.doc.planChanged.connect(lambda: seen.append(window.doc.plan.model.architecture.layers))
    before = window.doc.estimate
    edit = retype(qtbot, window, LAYERS, "1e15")
    assert seen == [] and window.doc.undo_stack.count() == 0
    qtbot.keyClick(edit, Qt.Key.Key_Return)
    assert 1 not in seen
    assert window.doc.plan.model.architecture.layers == 32
    assert window.doc.estimate is before
    binding = _binding(window, LAYERS)
    assert binding.error and "must be at most" in binding.error
    assert binding.message.isVisible() and binding.message.text() == binding.error
    assert window.banner.isVisible()
    assert "1 invalid field — showing the last valid estimate" in window.banner.text()
    assert window.verdict.stale.text().startswith("Showing the last valid estimate")


def test_a_pause_commits_the_whole_value(qtbot: Any, window: Any) -> None:
    """A value typed and left alone commits after the pause, as one undo step in words."""
    retype(qtbot, window, "parallelism.dp", "16")
    qtbot.waitUntil(lambda: window.doc.plan.parallelism.dp == 16, timeout=3000)
    assert window.doc.undo_stack.count() == 1
    assert window.doc.undo_stack.undoText() == "Set data-parallel size to 16"
    assert window.undo_action.text() == "&Undo Set data-parallel size to 16"
    assert not window.banner.isVisible()


def test_fixing_the_field_clears_the_banner(qtbot: Any, window: Any) -> None:
    edit = retype(qtbot, window, LAYERS, "abc")
    qtbot.keyClick(edit, Qt.Key.Key_Tab)
    assert "expected a whole number" in window.banner.text()
    edit = retype(qtbot, window, LAYERS, "16")
    qtbot.keyClick(edit, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: not window.doc.pending)
    assert window.doc.plan.model.architecture.layers == 16
    assert not window.banner.isVisible() and window.doc.invalid == {}
    assert window.verdict.stale.text() == ""


def test_ctrl_z_in_a_focused_field_undoes_the_document_edit(qtbot: Any, window: Any) -> None:
    """DP 16 committed with Enter, focus still in the field: Ctrl+Z undoes that edit (the
    field shows 8 again), pushes nothing, and keeps Redo; Ctrl+Shift+Z redoes it."""
    edit = retype(qtbot, window, "parallelism.dp", "16")
    qtbot.keyClick(edit, Qt.Key.Key_Return)
    assert window.doc.plan.parallelism.dp == 16 and edit.hasFocus()
    qtbot.keyClick(edit, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    QApplication.processEvents()
    assert window.doc.plan == default_plan()
    assert edit.text() == "8"
    stack = window.doc.undo_stack
    assert stack.count() == 1 and stack.canRedo() and stack.index() == 0
    mods = Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier
    qtbot.keyClick(edit, Qt.Key.Key_Z, mods)
    QApplication.processEvents()
    assert window.doc.plan.parallelism.dp == 16 and edit.text() == "16"
    qtbot.keyClick(edit, Qt.Key.Key_Tab)  # leaving the field commits nothing new
    assert stack.count() == 1 and stack.index() == 1


def test_ctrl_z_drops_typed_text_before_undoing(qtbot: Any, window: Any) -> None:
    """Text typed but not committed is dropped by the first Ctrl+Z (the field shows the
    plan's value); nothing was pushed, so nothing is undone or lost."""
    edit = retype(qtbot, window, "batch.seq_len", "81")
    qtbot.keyClick(edit, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert edit.text() == "4096" and window.doc.undo_stack.count() == 0
    assert window.doc.plan == default_plan()


def test_escape_abandons_typed_text(qtbot: Any, window: Any) -> None:
    edit = retype(qtbot, window, "batch.seq_len", "-5")
    qtbot.keyClick(edit, Qt.Key.Key_Escape)
    assert edit.text() == "4096" and not window.doc.invalid


def test_undo_texts_are_words(qtbot: Any, window: Any) -> None:
    doc = window.doc
    doc.set("batch.seq_len", 8192, merge=False)
    assert doc.undo_stack.undoText() == "Set sequence length to 8,192"
    doc.set("parallelism.sequence_parallel", True, merge=False)
    assert doc.undo_stack.undoText() == "Turn sequence parallelism on"
    doc.set("hardware.usable_hbm_bytes", 70 * 10**9, merge=False)
    assert doc.undo_stack.undoText() == "Set usable HBM to 70.00 GB"
    doc.set("method.lora.rank", 32, merge=False)
    assert doc.undo_stack.undoText() == "Set LoRA rank to 32"
