"""Edit → Undo / Redo bound to the document, not to the stack or a focused widget.

``QUndoStack.createUndoAction`` would call the stack directly, skipping the document's
rule that typed, uncommitted text is dropped first; and a focused line edit would keep
Ctrl+Z for its own history (which pushes a new edit and clears Redo). These actions
call :meth:`PlanDocument.undo` / :meth:`~PlanDocument.redo` and follow the stack's texts
("Undo Set data-parallel size to 16") and enabled state.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QWidget

from gui.document import PlanDocument


def _follow(action: QAction, word: str, text: str) -> None:
    action.setText(f"&{word} {text}".rstrip())


def toolbar_twin(action: QAction, parent: QWidget) -> QAction:
    """A toolbar button's action for ``action``: its short word and enabled state, never
    its changing text. A tool button whose action's text changes lays the toolbar out,
    and with it the whole window, again (a full repaint after every edit)."""
    twin = QAction(action.iconText(), parent)
    twin.setToolTip(action.iconText())
    twin.setEnabled(action.isEnabled())
    twin.triggered.connect(lambda _c=False: action.trigger())
    action.enabledChanged.connect(twin.setEnabled)
    return twin


def history_actions(doc: PlanDocument, parent: QWidget) -> tuple[QAction, QAction]:
    """(undo, redo) actions with the standard shortcuts, active in the whole window."""
    stack = doc.undo_stack
    undo = QAction("&Undo", parent)
    undo.setShortcut(QKeySequence(QKeySequence.StandardKey.Undo))
    undo.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
    undo.triggered.connect(lambda _c=False: doc.undo())
    redo = QAction("&Redo", parent)
    redo.setShortcut(QKeySequence(QKeySequence.StandardKey.Redo))
    redo.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
    redo.triggered.connect(lambda _c=False: doc.redo())
    stack.canUndoChanged.connect(undo.setEnabled)
    stack.canRedoChanged.connect(redo.setEnabled)
    stack.undoTextChanged.connect(lambda t: _follow(undo, "Undo", t))
    stack.redoTextChanged.connect(lambda t: _follow(redo, "Redo", t))
    undo.setIconText("Undo")  # the toolbar keeps the short word; the menu has the text
    redo.setIconText("Redo")
    undo.setEnabled(stack.canUndo())
    redo.setEnabled(stack.canRedo())
    _follow(undo, "Undo", stack.undoText())
    _follow(redo, "Redo", stack.redoText())
    return undo, redo
