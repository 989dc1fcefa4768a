"""Modal questions and messages, in one place so tests can answer them.

Tests replace these functions (monkeypatch) instead of clicking real dialogs.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QMessageBox, QWidget

from gui.files.autosave import Orphan
from gui.files.recovery_dialog import Choice, RecoveryDialog

FILE_FILTER = "MemPlan plans (*.memplan);;All files (*)"


def ask_unsaved(parent: QWidget, name: str) -> str:
    """'save', 'discard' or 'cancel' for a document with unsaved changes."""
    box = QMessageBox(
        QMessageBox.Icon.Warning,
        "Unsaved changes",
        f"“{name}” has unsaved changes. Save them first?",
        QMessageBox.StandardButton.Save
        | QMessageBox.StandardButton.Discard
        | QMessageBox.StandardButton.Cancel,
        parent,
    )
    box.setDefaultButton(QMessageBox.StandardButton.Save)
    answer = box.exec()
    if answer == QMessageBox.StandardButton.Save:
        return "save"
    if answer == QMessageBox.StandardButton.Discard:
        return "discard"
    return "cancel"


def ask_save_anyway(parent: QWidget, name: str, problems: list[str]) -> bool:
    """Whether to save ``name`` although ``problems`` (sentences) say it is not sound."""
    box = QMessageBox(
        QMessageBox.Icon.Warning,
        "Save this plan?",
        f"“{name}” can be saved, but:\n\n" + "\n\n".join(f"• {p}" for p in problems),
        QMessageBox.StandardButton.Save | QMessageBox.StandardButton.Cancel,
        parent,
    )
    box.button(QMessageBox.StandardButton.Save).setText("Save Anyway")
    box.setDefaultButton(QMessageBox.StandardButton.Cancel)
    return box.exec() == QMessageBox.StandardButton.Save


def ask_recovery(parent: QWidget | None, orphans: list[Orphan]) -> dict[Path, Choice]:
    """What to do with each autosave crashed instances left (empty: decide later)."""
    dialog = RecoveryDialog(parent, orphans)
    return dialog.choices() if dialog.exec() == RecoveryDialog.DialogCode.Accepted else {}


def show_error(parent: QWidget | None, title: str, text: str) -> None:
    QMessageBox.critical(parent, title, text)


def show_info(parent: QWidget | None, title: str, text: str) -> None:
    QMessageBox.information(parent, title, text)


def open_path(parent: QWidget, directory: str) -> str:
    path, _ = QFileDialog.getOpenFileName(parent, "Open plan", directory, FILE_FILTER)
    return path


def save_path(parent: QWidget, suggestion: str) -> str:
    path, _ = QFileDialog.getSaveFileName(parent, "Save plan as", suggestion, FILE_FILTER)
    if path and not path.endswith(".memplan"):
        path += ".memplan"
    return path
