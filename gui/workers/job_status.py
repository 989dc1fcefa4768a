"""A background job in the status bar: what it is doing, how far, and Cancel.

The report export (and any other job a user starts and may not want to wait for) shows
here instead of in a modal dialog, so the window stays usable while it runs: the text
says what is being done, the bar how far it is, and Cancel (or Escape while the bar has
the focus) stops it at its next step.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QStatusBar,
    QWidget,
)


class JobStatus(QWidget):
    """Hidden while no job runs."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("jobStatus")
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        self.text = QLabel(self)
        self.bar = QProgressBar(self)
        self.bar.setFixedWidth(160)
        self.bar.setTextVisible(False)
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.setObjectName("jobCancel")
        row.addWidget(self.text)
        row.addWidget(self.bar)
        row.addWidget(self.cancel_button)
        row.addStretch(1)  # a wide window's room goes here, not into a 250-px Cancel
        self._on_cancel: Callable[[], None] | None = None
        self.cancel_button.clicked.connect(self._cancel)
        self.hide()

    def begin(self, text: str, on_cancel: Callable[[], None]) -> None:
        """Show the job. A status-bar message still showing (the last export's "Report
        cancelled…", for 5 s) is cleared first: QStatusBar paints its message over its
        normal widgets and hides them only when a message comes, so a job shown under a
        message had its text drawn through the message's."""
        bar = self.parentWidget()
        if isinstance(bar, QStatusBar):
            bar.clearMessage()
        self._on_cancel = on_cancel
        self.text.setText(text)
        self.bar.setRange(0, 0)  # busy until the first progress report
        self.show()

    def step(self, text: str, done: int, total: int) -> None:
        self.text.setText(text)
        self.bar.setRange(0, max(total, 1))
        self.bar.setValue(min(done, max(total, 1)))

    def end(self) -> None:
        self._on_cancel = None
        self.hide()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        """Escape with the focus on the job (its Cancel button: a key it ignores comes
        here) cancels, as Cancel does; any other key goes on to the window."""
        if event.key() == Qt.Key.Key_Escape and self._on_cancel is not None:
            event.accept()
            self._cancel()
            return
        super().keyPressEvent(event)

    def _cancel(self) -> None:
        if self._on_cancel is not None:
            self._on_cancel()
