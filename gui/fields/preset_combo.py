"""A preset chooser whose size hint holds its longest item, with a compact minimum.

The form's other combo boxes are :func:`gui.fields.fields.compact`: their size hint is
eight characters, so a narrow input panel can shrink them. A preset's name is what the
user picks by ("NVIDIA DGX H100 (8 × H100 80 GB)"), and under Xvfb at 1366×768 the
Hardware tab's node box showed "NVIDIA DGX H100 (8 × H100": the layout gave it no more
than its hint. This box asks for its longest item's width (what
:meth:`QComboBox.sizeHint` gives under ``AdjustToContents``) and keeps the compact
minimum, so the panel can still be narrowed, and then the box's tooltip has its text.
"""

from __future__ import annotations

from PySide6.QtCore import QSize
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QComboBox, QStyle, QStyleOptionComboBox, QWidget

from gui.fields.fields import compact


class PresetCombo(QComboBox):
    """A compact combo box that asks for room for its longest item's text."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        compact(self)
        self.currentTextChanged.connect(self.setToolTip)

    def longest_text_width(self) -> int:
        """The horizontal advance of the widest item's text in this box's font."""
        metrics = QFontMetrics(self.font())
        return max((metrics.horizontalAdvance(self.itemText(i)) for i in range(self.count())),
                   default=0)  # fmt: skip

    def sizeHint(self) -> QSize:
        """The compact hint widened to the longest item plus the frame and arrow the
        style draws around the text (as ``AdjustToContents`` would measure it)."""
        hint = super().sizeHint()
        opt = QStyleOptionComboBox()
        self.initStyleOption(opt)
        need = self.style().sizeFromContents(
            QStyle.ContentsType.CT_ComboBox,
            opt,
            QSize(self.longest_text_width(), hint.height()),
            self,
        )
        return QSize(max(hint.width(), need.width()), hint.height())
