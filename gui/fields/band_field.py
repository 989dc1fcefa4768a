"""A byte band that is either the stack's (auto) or the user's own (custom).

``runtime.nccl_bytes_per_communicator`` is a :class:`ByteRange` or ``None``; ``None``
means "the band the stack and accelerator imply" (0.5–0.7 GB on Ampere, 0.5–2 GB on
Hopper). The window shows it as an auto / custom choice over the low and high fields:
at auto the fields show the stack's band, read-only, with a "from stack" badge; choosing
custom starts from that band, so the numbers do not jump; choosing auto again drops the
user's band. Each choice is one undo step.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QComboBox, QGridLayout, QLabel, QWidget

from engine.units import fmt_range
from gui.document import PlanDocument
from gui.fields.fields import FieldBinding, compact, mark_from_stack
from gui.fields.fieldspec import FieldSpec
from gui.fields.plan_view import PlanView, plan_view
from gui.fields.stack_badge import badge_caption, badge_tooltip
from gui.fields.undo_text import field_noun

AUTO, CUSTOM = "auto", "custom"


class BandFieldBinding(FieldBinding):
    """The low or high of an optional band: the stack's value while the band is auto."""

    def current_value(self) -> Any:
        return plan_view(self.doc.plan).value(self.spec.path)


class BandModeBinding(QObject):
    """The auto / custom choice of one optional band."""

    def __init__(self, doc: PlanDocument, spec: FieldSpec, parent: QWidget) -> None:
        super().__init__(parent)
        self.doc, self.spec = doc, spec
        self.label = QLabel(spec.label, parent)
        self.label.setWordWrap(True)
        self.caption = QLabel(parent)
        self.caption.setObjectName("fieldCaption")
        self.caption.setMaximumWidth(150)
        self.editor = QComboBox(parent)
        compact(self.editor)
        self.editor.addItem("auto (the stack's band)", AUTO)
        self.editor.addItem("custom", CUSTOM)
        self.editor.setObjectName(f"band:{spec.path}")
        self.editor.setProperty("plan_path", spec.path)
        self.editor.activated.connect(lambda i: self.choose(self.editor.itemData(i)))
        self.label.setBuddy(self.editor)

    def place(self, grid: QGridLayout) -> None:
        row = grid.rowCount()
        grid.addWidget(self.label, row, 0)
        grid.addWidget(self.editor, row, 1)
        grid.addWidget(self.caption, row, 2)

    def choose(self, mode: str) -> None:
        """Switch the band to auto or custom; custom starts from the band on screen."""
        path, noun = self.spec.path, field_noun(self.spec.path)
        if mode == AUTO:
            self.doc.set(path, None, merge=False, text=f"Set {noun} to the stack's band")
        elif self.doc.value(path) is None:
            view = plan_view(self.doc.plan)
            band = {"low": view.value(f"{path}.low"), "high": view.value(f"{path}.high")}
            self.doc.set(path, band, merge=False, text=f"Set a custom {noun}")

    def refresh(self, view: PlanView) -> None:
        """Show whether the band is the stack's, and which band that is."""
        derived = view.derived.get(self.spec.path)
        self.editor.setCurrentIndex(0 if derived is not None else 1)
        tip = self.spec.description
        mark_from_stack(self.caption, derived is not None)
        if derived is None:
            self.caption.setText("def. auto")
        else:
            band = derived.value
            shown = fmt_range(band["low"], band["high"], "gb", 1)
            self.caption.setText(badge_caption(self.spec.path, derived, shown))
            tip = f"{badge_tooltip(derived)}<br><br>{tip}"
        for w in (self.label, self.editor, self.caption):
            w.setToolTip(tip)
