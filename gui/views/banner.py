"""The banner over the results: says when the figures on screen are not the plan's.

Two things keep the last valid estimate on screen: fields holding a value that was
refused (typed text that does not parse, a value the plan's validation rejects, a layout
the engine cannot compute — each marked at its field with its message), and a plan the
engine refuses for a reason no field shows. The banner counts the first ("2 invalid
fields — showing the last valid estimate"), names the first field's message, and jumps
to that field when clicked; it is hidden while the figures are the plan's own.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import QLabel, QWidget

from gui.document import PlanDocument
from gui.fields.undo_text import field_noun

BANNER_STYLE = (
    "QLabel#invalidBanner { background: #FDECC8; color: #3D2A00; border: 1px solid #E0A526;"
    " border-radius: 4px; padding: 5px 8px; }"
)
"""Dark brown on pale amber: readable in light and dark themes alike (the banner keeps
its own colours rather than the palette's)."""


def banner_text(invalid: dict[str, str], estimate_error: str | None) -> str:
    """What the banner says, or "" when the figures on screen are the plan's."""
    if invalid:
        n = len(invalid)
        path, message = next(iter(invalid.items()))
        fields = "1 invalid field" if n == 1 else f"{n} invalid fields"
        return (
            f"<b>{fields} — showing the last valid estimate.</b> "
            f"{field_noun(path).capitalize()}: {_esc(message)}"
        )
    if estimate_error:
        return (
            "<b>This plan cannot be computed — showing the last valid estimate.</b> "
            f"{_esc(estimate_error)}"
        )
    return ""


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class InvalidBanner(QLabel):
    """A one-line notice, shown only while the estimate on screen is not the plan's."""

    def __init__(
        self, doc: PlanDocument, go_to: Callable[[str], None], parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.doc, self.go_to = doc, go_to
        self.setObjectName("invalidBanner")
        self.setStyleSheet(BANNER_STYLE)
        self.setWordWrap(True)
        self.setTextFormat(Qt.TextFormat.RichText)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setToolTip("Click to go to the field")
        self.hide()
        doc.invalidChanged.connect(self.update_text)
        doc.estimateChanged.connect(self.update_text)
        doc.estimateFailed.connect(lambda _m: self.update_text())

    def update_text(self) -> None:
        text = banner_text(self.doc.invalid, self.doc.estimate_error)
        self.setText(text)
        self.setVisible(bool(text))

    def mousePressEvent(self, ev: QMouseEvent) -> None:
        if self.doc.invalid:
            self.go_to(next(iter(self.doc.invalid)))
        ev.accept()
