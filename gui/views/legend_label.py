"""The chart's legend label, which claims the height its wrapped lines need.

A word-wrapped ``QLabel`` reports a one-line minimum height, and a ``QSplitter`` does not
ask a child for its height-for-width. On a 1366×768 screen the splitter then gives the
chart box less room than chart plus legend need, and the label, vertically centred,
paints its overflowing lines over the chart's phase names. Claiming the wrapped height
as the minimum makes the splitter shrink the chart (or the table below) instead.
"""

from __future__ import annotations

from PySide6.QtGui import QResizeEvent, QTextDocument
from PySide6.QtWidgets import QLabel, QWidget


class LegendLabel(QLabel):
    """A word-wrapped label whose minimum height follows its text at its current width."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWordWrap(True)

    def setText(self, text: str) -> None:
        super().setText(text)
        self._claim_wrapped_height()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._claim_wrapped_height()

    def _claim_wrapped_height(self) -> None:
        """Set the minimum height to the wrapped text's height at this width; the width
        does not depend on the height, so this settles after one pass. The height is
        laid out on a text document, not read from ``heightForWidth``, which never
        answers below the minimum already set (it would only ever grow)."""
        if self.width() < 50:
            return  # before the first real layout the width is a placeholder
        doc = QTextDocument()
        doc.setDefaultFont(self.font())
        doc.setDocumentMargin(0)
        doc.setHtml(self.text())
        doc.setTextWidth(self.contentsRect().width())
        margins = self.contentsMargins()
        needed = int(doc.size().height() + 0.999) + margins.top() + margins.bottom()
        if needed != self.minimumHeight():
            self.setMinimumHeight(needed)
