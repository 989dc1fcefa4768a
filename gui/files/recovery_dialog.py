"""The crash-recovery dialog: every plan that crashed instances left, and what to do
with each (restore it in a window, save it to a file, discard it, or decide later)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from engine.errors import clip
from engine.units import fmt_count
from gui.files.autosave import Orphan

Choice = Literal["restore", "save", "discard", "later"]

CHOICES: dict[Choice, str] = {
    "restore": "Restore in a window",
    "save": "Save to a file…",
    "discard": "Discard",
    "later": "Decide at the next start",
}
COLUMNS = ("Plan", "Unsaved changes to", "Autosaved", "Size", "Config", "Action")
_NAME_CHARS = 60


def row_cells(orphan: Orphan) -> tuple[str, str, str, str, str]:
    """The texts of one row (a plan that cannot be read says why, in the first cell)."""
    name = clip(orphan.name or "Untitled plan", _NAME_CHARS)
    if orphan.problem:
        name = f"(cannot be read: {clip(orphan.problem, _NAME_CHARS)})"
    target = Path(orphan.original).name if orphan.original else "a new plan"
    config = orphan.config_hash[:12] if orphan.config_hash else "—"
    return name, target, orphan.saved_at.replace("T", " "), f"{fmt_count(orphan.size)} B", config


class RecoveryDialog(QDialog):
    """One row per orphaned autosave, each with its own action."""

    def __init__(self, parent: QWidget | None, orphans: list[Orphan]) -> None:
        super().__init__(parent)
        self.setWindowTitle("Recover unsaved plans")
        self.orphans = orphans
        intro = QLabel(
            f"MemPlan did not close cleanly. {len(orphans)} plan(s) with unsaved changes "
            "were autosaved. Choose what to do with each; nothing is deleted unless you "
            "discard it.",
            self,
        )
        intro.setWordWrap(True)
        self.table = QTableWidget(len(orphans), len(COLUMNS), self)
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.combos: list[QComboBox] = []
        for row, orphan in enumerate(orphans):
            for col, text in enumerate(row_cells(orphan)):
                item = QTableWidgetItem(text)
                item.setToolTip(str(orphan.original or orphan.plan_path))
                self.table.setItem(row, col, item)
            combo = QComboBox(self.table)
            for key, label in CHOICES.items():
                if orphan.problem is None or key in ("discard", "later"):
                    combo.addItem(label, key)
            if orphan.problem is not None:  # never delete by default what was not shown
                combo.setCurrentIndex(combo.findData("later"))
            self.table.setCellWidget(row, len(COLUMNS) - 1, combo)
            self.combos.append(combo)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        buttons = QDialogButtonBox(self)
        buttons.addButton("Apply", QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.addButton("Decide later", QDialogButtonBox.ButtonRole.RejectRole)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addWidget(self.table, 1)
        layout.addWidget(buttons)
        self.resize(820, 160 + 30 * min(len(orphans), 10))

    def set_choice(self, row: int, choice: Choice) -> None:
        combo = self.combos[row]
        combo.setCurrentIndex(combo.findData(choice))

    def choices(self) -> dict[Path, Choice]:
        """The action chosen for each autosave, by its path."""
        return {
            o.plan_path: c.currentData() for o, c in zip(self.orphans, self.combos, strict=True)
        }
