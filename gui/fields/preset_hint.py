"""A preset picked in a drop-down but not applied says so, under the drop-down.

The preset choosers are choosers, not the plan: picking Llama-3.1-70B changes nothing
until "Apply preset", and an 8B estimate then showed under a 70B label. The hint names
the picked preset, says the fields and the estimate are still the plan's, and names the
button; it goes when the pick is applied or the chooser is back on the plan's preset.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QComboBox, QLabel, QWidget


class PendingPick:
    """Watches one chooser against the index of the plan's own preset (−1: none)."""

    def __init__(
        self, combo: QComboBox, parent: QWidget, button: str, plan_index: Callable[[], int]
    ) -> None:
        self.combo, self.button, self.plan_index = combo, button, plan_index
        self.label = QLabel("", parent)
        self.label.setObjectName(f"{combo.objectName()}Pending")
        self.label.setWordWrap(True)
        self.label.setStyleSheet("color: #b36b00;")
        self.label.setHidden(True)
        combo.currentIndexChanged.connect(self.update)

    @property
    def pending(self) -> bool:
        i = self.combo.currentIndex()
        return i >= 0 and i != self.plan_index()

    def update(self, *_: object) -> None:
        pending = self.pending
        if pending:
            self.label.setText(
                f"“{self.combo.currentText()}” is picked but not applied: the fields and "
                f"the estimate are still the plan's. Press {self.button} to apply it."
            )
        self.label.setHidden(not pending)
