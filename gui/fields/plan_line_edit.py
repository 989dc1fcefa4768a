"""A line edit that leaves Undo and Redo to the plan's document.

QLineEdit keeps its own undo history: Ctrl+Z in a focused field would undo its text,
commit the result as a new plan edit and clear the document's Redo. A plan field's
editor declines those keys so the document's history wins whatever has the focus.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QAction, QKeyEvent, QKeySequence
from PySide6.QtWidgets import QLineEdit, QWidget

CHORD = (
    Qt.KeyboardModifier.ControlModifier
    | Qt.KeyboardModifier.AltModifier
    | Qt.KeyboardModifier.MetaModifier
)
TEXT_KEYS = (
    QKeySequence.StandardKey.Copy,
    QKeySequence.StandardKey.Cut,
    QKeySequence.StandardKey.Paste,
    QKeySequence.StandardKey.SelectAll,
)
"""Chords a field keeps even if an action were bound to them."""


def history_key(event: QKeyEvent) -> bool | None:
    """True for the Undo key, False for Redo, None for any other key."""
    if event.matches(QKeySequence.StandardKey.Undo):
        return True
    if event.matches(QKeySequence.StandardKey.Redo):
        return False
    return None


def window_key(widget: QWidget, event: QKeyEvent) -> bool:
    """A chord one of the window's actions is bound to: the window's, not the field's.
    QLineEdit on X11 takes Ctrl+E as "end of line" (``QKeySequence.MoveToEndOfLine``
    there is End, Ctrl+E), which swallowed File → Export Report's Ctrl+E whenever a
    field had the focus (seen under Xvfb); End still moves to the end."""
    if not event.modifiers() & CHORD or any(event.matches(k) for k in TEXT_KEYS):
        return False
    pressed = QKeySequence(event.keyCombination())
    return any(
        pressed in action.shortcuts()
        for action in widget.window().findChildren(QAction)
        if action.isEnabled()
    )


class PlanLineEdit(QLineEdit):
    """A line edit that hands Undo and Redo to the document instead of keeping its own
    history: it declines the shortcut override (so Edit → Undo's shortcut fires) and
    forwards the key when no action takes it (nothing to undo). It declines the other
    window shortcuts too (:func:`window_key`). Escape abandons the typed text."""

    historyKey = Signal(bool)  # True: undo, False: redo
    escaped = Signal()

    def event(self, event: QEvent) -> bool:
        if (
            event.type() == QEvent.Type.ShortcutOverride
            and isinstance(event, QKeyEvent)
            and (history_key(event) is not None or window_key(self, event))
        ):
            event.ignore()
            return True
        return super().event(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        which = history_key(event)
        if which is not None:
            event.accept()
            self.historyKey.emit(which)
            return
        if event.key() == Qt.Key.Key_Escape and self.isModified():
            event.accept()
            self.escaped.emit()
            return
        super().keyPressEvent(event)
