"""Field widgets bound to one plan path each, generated from a :class:`FieldSpec`.

A binding writes through ``PlanDocument.set`` on every keystroke or click (typing in one
field merges into one undo step), and reads back from the plan on ``planChanged``. When
the engine rejects a value the field turns red with the engine's message as its tooltip
and the plan, hence the estimate on screen, stays as it was.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QGridLayout,
    QLabel,
    QLineEdit,
    QWidget,
)

from engine.plan import default_plan, get_value
from engine.units import GB, GiB
from gui.document import PlanDocument
from gui.fieldspec import (
    FieldSpec,
    format_bytes_field,
    format_default,
    parse_bytes,
    parse_json_like,
    parse_list,
    parse_number,
)

_DEFAULT_PLAN = default_plan()
CAPTION_STYLE = "color: palette(placeholder-text); font-size: 8pt;"
ERROR_STYLE = "border: 1px solid #d0302f; background: rgba(208, 48, 47, 0.10);"


def _display(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def compact(combo: QComboBox) -> None:
    """Let a combo box shrink to the form's width instead of its longest item."""
    combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
    combo.setMinimumContentsLength(8)


class FieldBinding(QObject):
    """One plan field: its label, editor and unit/default caption."""

    def __init__(self, doc: PlanDocument, spec: FieldSpec, units: str, parent: QWidget) -> None:
        super().__init__(parent)
        self.doc, self.spec, self.units = doc, spec, units
        self.error: str | None = None
        self.disabled_reason: str | None = None
        self.label = QLabel(spec.label, parent)
        self.caption = QLabel(parent)
        self.caption.setObjectName("fieldCaption")
        self.caption.setStyleSheet(CAPTION_STYLE)
        self.caption.setMaximumWidth(150)
        self.editor = self._make_editor(parent)
        self.editor.setObjectName(f"field:{spec.path}")
        self.editor.setProperty("plan_path", spec.path)
        self.refresh()
        self._update_caption()
        self._update_tooltip()

    # construction ----------------------------------------------------------------
    def _make_editor(self, parent: QWidget) -> QWidget:
        spec = self.spec
        if spec.kind == "bool":
            box = QCheckBox(parent)
            box.toggled.connect(lambda on: self._commit(bool(on), merge=False))
            return box
        if spec.kind == "choice":
            combo = QComboBox(parent)
            compact(combo)
            for choice in spec.choices:
                combo.addItem(str(choice), choice)
            combo.activated.connect(lambda i: self._commit(combo.itemData(i), merge=False))
            return combo
        edit = QLineEdit(parent)
        if spec.optional:
            edit.setPlaceholderText("auto")
        elif spec.kind == "list" and spec.choices:
            edit.setPlaceholderText(", ".join(str(c) for c in spec.choices))
        edit.textEdited.connect(self._text_edited)
        edit.editingFinished.connect(self._finish_typing)
        return edit

    # reading and writing -------------------------------------------------------------
    def parse(self, text: str) -> Any:
        kind = self.spec.kind
        if kind == "bytes":
            if not text.strip() and self.spec.optional:
                return None
            return parse_bytes(text, "gib" if self.units == "gib" else "gb")
        if kind in ("int", "float"):
            return parse_number(text, kind, self.spec.optional)
        if kind == "list":
            if not text.strip() and self.spec.optional:
                return None
            return parse_list(text)
        if kind == "json":
            return parse_json_like(text)
        if not text and self.spec.optional:
            return None
        return text

    def format(self, value: Any) -> str:
        if self.spec.kind == "bytes" and isinstance(value, int):
            return format_bytes_field(value, self.units)
        return _display(value)

    def _text_edited(self, text: str) -> None:
        try:
            value = self.parse(text)
        except ValueError as exc:
            self.set_error(str(exc))
            return
        self._commit(value, merge=True)

    def _finish_typing(self) -> None:
        self.doc.end_merge()
        if self.error is None:
            self.refresh(force=True)

    def _commit(self, value: Any, merge: bool) -> None:
        self.doc.set(self.spec.path, value, merge=merge)

    def refresh(self, force: bool = False) -> None:
        """Show the plan's value, unless the user is typing an equivalent one."""
        value = self.doc.value(self.spec.path)
        editor = self.editor
        if isinstance(editor, QCheckBox):
            editor.blockSignals(True)
            editor.setChecked(bool(value))
            editor.blockSignals(False)
        elif isinstance(editor, QComboBox):
            editor.blockSignals(True)
            editor.setCurrentIndex(max(0, editor.findData(value)))
            editor.blockSignals(False)
        elif isinstance(editor, QLineEdit):
            if not force and editor.hasFocus() and self.error is None:
                try:
                    if self.parse(editor.text()) == value:
                        return
                except ValueError:
                    pass
            text = self.format(value)
            if editor.text() != text:
                editor.setText(text)
                editor.setCursorPosition(0)
            if self.error is not None:
                self.set_error(None)
        if self.spec.kind == "bytes":
            self._update_caption()

    def set_units(self, units: str) -> None:
        self.units = units
        self.refresh(force=True)
        self._update_caption()

    # state display -------------------------------------------------------------------
    def _update_caption(self) -> None:
        spec = self.spec
        if spec.kind == "bytes":
            value = self.doc.value(spec.path)
            if isinstance(value, int):
                other = value / GiB if self.units != "gib" else value / GB
                name = "GiB" if self.units != "gib" else "GB"
                self.caption.setText(
                    f"= {other:,.2f} {name}<br>def. "
                    f"{format_bytes_field(get_value(_DEFAULT_PLAN, spec.path), self.units)}"
                )
            return
        default = format_default(self.default_spec())
        if len(default) > 14:
            default = default[:12] + "…"
        unit = f"{spec.unit} · " if spec.unit else ""
        self.caption.setText(f"{unit}def. {default}")

    def default_spec(self) -> FieldSpec:
        """The spec with the default plan's value (nested models have no own default)."""
        try:
            value = get_value(_DEFAULT_PLAN, self.spec.path)
        except KeyError:
            return self.spec
        return replace(self.spec, default=value)

    def _update_tooltip(self) -> None:
        tip = self.default_spec().tooltip()
        if self.disabled_reason:
            tip = f"<b>Does not apply:</b> {self.disabled_reason}<br><br>{tip}"
        if self.error:
            tip = f"<b style='color:#d0302f'>{self.error}</b><br><br>{tip}"
        for w in (self.label, self.editor, self.caption):
            w.setToolTip(tip)

    def set_error(self, message: str | None) -> None:
        self.error = message
        self.editor.setStyleSheet(ERROR_STYLE if message else "")
        self.editor.setProperty("error_message", message or "")
        self._update_tooltip()

    def set_disabled_reason(self, reason: str | None) -> None:
        if reason == self.disabled_reason:
            return
        self.disabled_reason = reason
        for w in (self.label, self.editor, self.caption):
            w.setEnabled(reason is None)
        self._update_tooltip()


def add_to_grid(grid: QGridLayout, binding: FieldBinding) -> None:
    """Place label | editor | caption on the next row of a three-column grid."""
    row = grid.rowCount()
    grid.addWidget(binding.label, row, 0, Qt.AlignmentFlag.AlignVCenter)
    grid.addWidget(binding.editor, row, 1)
    grid.addWidget(binding.caption, row, 2)
