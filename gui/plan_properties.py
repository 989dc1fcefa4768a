"""File → Properties…: the plan's name and notes.

The name and notes are the plan's identity for people: the window title, the file, the
report's title page and running header, and the report's default file name all show
them. They are metadata — outside the config hash, so renaming a plan never changes its
figures — but an edit of them is undoable and marks the document unsaved like any other.
"""

from __future__ import annotations

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QWidget,
)

from gui.document import PlanDocument

NAME_MAX = 200
"""Longest plan name accepted (it is printed in the report header, elided there)."""

PROPERTIES_SHORTCUT = "Ctrl+Alt+P"


class PropertiesDialog(QDialog):
    """Edit the name and the notes of a plan."""

    def __init__(self, name: str, notes: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Plan properties")
        form = QFormLayout(self)
        self.name = QLineEdit(name, self)
        self.name.setObjectName("planName")
        self.name.setMaxLength(NAME_MAX)
        self.notes = QPlainTextEdit(notes, self)
        self.notes.setObjectName("planNotes")
        self.notes.setTabChangesFocus(True)
        self.notes.setMinimumSize(420, 160)
        form.addRow("&Name", self.name)
        form.addRow("N&otes", self.notes)
        hint = QLabel(
            "Shown in the window title, saved in the file, printed on the report's title "
            "page; the report's file name is made from the name.",
            self,
        )
        hint.setWordWrap(True)
        hint.setStyleSheet("color: palette(placeholder-text); font-size: 8pt;")
        form.addRow(hint)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel, self
        )
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)

    def values(self) -> tuple[str, str]:
        return self.name.text().strip(), self.notes.toPlainText()


def properties_action(parent: QWidget, doc: PlanDocument) -> QAction:
    """The File-menu action that opens the dialog and applies it as one undo step."""
    action = QAction("P&roperties…", parent)
    action.setShortcut(QKeySequence(PROPERTIES_SHORTCUT))
    action.setStatusTip("Name the plan and write its notes")

    def run() -> None:
        dialog = PropertiesDialog(doc.name, doc.notes, parent)
        if dialog.exec() == QDialog.DialogCode.Accepted:
            doc.set_properties(*dialog.values())

    action.triggered.connect(lambda _c=False: run())
    return action
