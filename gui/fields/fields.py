"""Field widgets bound to one plan path each, generated from a :class:`FieldSpec`.

A binding commits a whole value, never a prefix: a click or a choice at once, typed
text when the user finishes (Enter, Tab, leaving the field) or pauses for
:data:`COMMIT_PAUSE_MS`. Typing ``1e15`` in Layers therefore never commits ``1``: the
whole text is parsed and validated when it commits. Commits of one typing run merge into
one undo step. The binding reads back from the plan on ``planChanged``, leaving typed
text alone until it is committed or abandoned.

When the text or the engine rejects a value the field turns red and shows the message in
a line under it (readable in light and dark themes, not only in a tooltip), the document
counts it for the window's banner, and the plan — hence the estimate on screen — stays
as it was. Ctrl+Z and Ctrl+Shift+Z in a field go to the document's history (the line
edit's own undo would push a new edit and clear Redo).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QComboBox,
    QGridLayout,
    QLabel,
    QLineEdit,
    QWidget,
)

from engine.stacks.defaults import Derived
from engine.units import GB, GiB
from gui.document import PlanDocument
from gui.fields.fieldspec import (
    FieldSpec,
    choice_text,
    format_bytes_field,
    format_default,
    parse_bytes,
    parse_json_like,
    parse_list,
    parse_number,
)
from gui.fields.plan_line_edit import PlanLineEdit
from gui.fields.preset_defaults import plan_default
from gui.fields.stack_badge import badge_caption, badge_tooltip, short_value

_UNSET: Any = object()


CAPTION_STYLE = "color: palette(placeholder-text); font-size: 8pt;"
STACK_CAPTION_STYLE = "color: palette(link); font-size: 8pt;"
"""A caption naming the stack a field's value comes from (the "from stack" badge)."""
ERROR_STYLE = "border: 1px solid #d0302f; background: rgba(208, 48, 47, 0.10);"
ERROR_INK = {"light": "#B3261E", "dark": "#FF8A80"}
"""The message under an invalid field: dark red on a light window, light red on a dark
one (both above 4.5:1 contrast against Fusion's window colours)."""

LABEL_MAX_WIDTH = 150
"""Widest a field's label gets; a longer one wraps (the panel stays narrow enough for a
1366-px laptop screen)."""

COMMIT_PAUSE_MS = 600
"""A pause in typing this long commits the whole text: longer than the gap between
keystrokes of a word, short enough that the chart follows a value typed and left."""


def dark_palette() -> bool:
    """Whether the application's window colour is dark (the system's dark scheme)."""
    app = QApplication.instance()
    if not isinstance(app, QApplication):
        return False
    return app.palette().color(QPalette.ColorRole.Window).lightnessF() < 0.5


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


TRI_STATE: tuple[tuple[str, bool | None], ...] = (("auto", None), ("on", True), ("off", False))
"""The choices of an optional switch (``bool | None``): auto — the stack's default, said
beside it — or on or off."""


class FieldBinding(QObject):
    """One plan field: its label, editor and unit/default caption."""

    def __init__(self, doc: PlanDocument, spec: FieldSpec, units: str, parent: QWidget) -> None:
        super().__init__(parent)
        self.doc, self.spec, self.units = doc, spec, units
        self.error: str | None = None
        self.disabled_reason: str | None = None
        self.derived: Derived | None = None  # the stack's value while the field is auto
        self.label = QLabel(spec.label, parent)
        self.label.setWordWrap(True)  # "DeepSpeed param persistence threshold" on two lines
        self.label.setMaximumWidth(LABEL_MAX_WIDTH)
        one_line = self.label.fontMetrics().horizontalAdvance(spec.label) + 4
        self.label.setMinimumWidth(min(one_line, LABEL_MAX_WIDTH))
        self.caption = QLabel(parent)
        self.caption.setObjectName("fieldCaption")  # styled by its page (CAPTION_STYLE)
        self.caption.setMaximumWidth(150)
        self.message = QLabel(parent)
        self.message.setObjectName("fieldMessage")
        self.message.setWordWrap(True)
        self.message.setTextFormat(Qt.TextFormat.PlainText)
        self.message.hide()
        self._pause = QTimer(self)
        self._pause.setSingleShot(True)
        self._pause.setInterval(COMMIT_PAUSE_MS)
        self._pause.timeout.connect(self._commit_text)
        self._caption_for: Any = _UNSET
        self.editor = self._make_editor(parent)
        self.editor.setObjectName(f"field:{spec.path}")
        self.editor.setProperty("plan_path", spec.path)
        if spec.kind != "bytes":  # a size's caption follows its value (refresh)
            self._update_caption()
        self._update_tooltip()  # the value comes with the page's first refresh

    # construction ----------------------------------------------------------------
    def _make_editor(self, parent: QWidget) -> QWidget:
        spec = self.spec
        if spec.kind == "bool" and spec.optional:  # a checkbox has no way back to None
            combo = QComboBox(parent)
            compact(combo)
            for text, _value in TRI_STATE:
                combo.addItem(text)
            combo.activated.connect(lambda i: self._commit(TRI_STATE[i][1], merge=False))
            return combo
        if spec.kind == "bool":
            box = QCheckBox(parent)
            box.toggled.connect(lambda on: self._commit(bool(on), merge=False))
            return box
        if spec.kind == "choice":
            combo = QComboBox(parent)
            compact(combo)
            for choice in spec.choices:
                combo.addItem(choice_text(choice), choice)
            combo.activated.connect(lambda i: self._commit(combo.itemData(i), merge=False))
            return combo
        edit = PlanLineEdit(parent)
        edit.setMinimumWidth(70)
        if spec.optional:
            edit.setPlaceholderText("auto")
        elif spec.kind == "list" and spec.choices:
            edit.setPlaceholderText(", ".join(str(c) for c in spec.choices))
        edit.textEdited.connect(self._text_edited)
        edit.editingFinished.connect(self._finish_typing)
        edit.historyKey.connect(lambda undo: self.doc.undo() if undo else self.doc.redo())
        edit.escaped.connect(self._abandon)
        self.doc.abandonEdits.connect(self._abandon)
        self.doc.commitTyping.connect(self._commit_text)
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

    @property
    def typing(self) -> bool:
        """Whether the editor holds typed text not committed yet (nor abandoned)."""
        return self.spec.path in self.doc.typing

    def _text_edited(self, _text: str) -> None:
        self.doc.note_typing(self.spec.path, True)
        self._pause.start()

    def _commit_text(self) -> None:
        """Parse and validate the whole text; commit it when both accept it."""
        self._pause.stop()
        editor = self.editor
        if not isinstance(editor, QLineEdit) or not self.typing:
            return
        try:
            value = self.parse(editor.text())
        except ValueError as exc:  # worded as --set words it: "path: sentence"
            self.set_error(f"{self.spec.path}: {exc}")
            return
        if self.doc.set(self.spec.path, value, merge=True):
            self.doc.note_typing(self.spec.path, False)

    def _finish_typing(self) -> None:
        self._commit_text()
        self.doc.end_merge()
        if self.error is None and not self.typing:
            self.refresh(force=True)

    def _abandon(self) -> None:
        """Drop typed text (Escape, or an undo that came first): show the plan's value."""
        if not self.typing:
            return
        self._pause.stop()
        self.doc.note_typing(self.spec.path, False)
        self.set_error(None)
        self.refresh(force=True)

    def _commit(self, value: Any, merge: bool) -> None:
        self.doc.set(self.spec.path, value, merge=merge)

    def refresh(self, force: bool = False, value: Any = _UNSET) -> None:
        """Show the plan's value (``value`` when the caller has it), unless the user is
        typing: typed text stays until it is committed or abandoned."""
        if value is _UNSET:
            value = self.current_value()
        editor = self.editor
        if isinstance(editor, QCheckBox):
            if value is None and self.derived is not None:
                value = self.derived.value  # an auto switch shows what the stack does
            editor.blockSignals(True)
            editor.setChecked(bool(value))
            editor.blockSignals(False)
        elif isinstance(editor, QComboBox) and self.spec.kind == "bool":
            auto = TRI_STATE[0][0]
            if self.derived is not None:
                auto += f" ({short_value(self.derived.value)})"  # what the stack does
            editor.setItemText(0, auto)
            editor.blockSignals(True)
            editor.setCurrentIndex(next(i for i, (_t, v) in enumerate(TRI_STATE) if v is value))
            editor.blockSignals(False)
        elif isinstance(editor, QComboBox):
            editor.blockSignals(True)
            editor.setCurrentIndex(max(0, editor.findData(value)))
            editor.blockSignals(False)
        elif isinstance(editor, QLineEdit):
            if not force and self.typing:
                return  # the user's text stays until it is committed or abandoned
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
            editor.setModified(False)
            if self.error is not None:
                self.set_error(None)
        if self.spec.kind == "bytes" and value != self._caption_for:
            self._caption_for = value
            self._update_caption(value)

    def current_value(self) -> Any:
        """The value the field shows: the plan's."""
        return self.doc.value(self.spec.path)

    def set_units(self, units: str) -> None:
        self.units = units
        self.refresh(force=True)
        self._update_caption()

    # state display -------------------------------------------------------------------
    def _update_caption(self, value: Any = _UNSET) -> None:
        spec = self.spec
        if spec.kind == "bytes":
            if value is _UNSET:
                value = self.current_value()
            if isinstance(value, int):
                other = value / GiB if self.units != "gib" else value / GB
                name = "GiB" if self.units != "gib" else "GB"
                if self.derived is not None:
                    shown = f"{other:,.2f} {name}"
                    self.caption.setText(badge_caption(spec.path, self.derived, shown))
                    return
                try:
                    default = format_bytes_field(plan_default(self.doc.plan, spec.path), self.units)
                except (KeyError, TypeError):  # inside a band that defaults to auto
                    default = "auto"
                self.caption.setText(f"= {other:,.2f} {name}<br>def. {default}")
            return
        if self.derived is not None:
            self.caption.setText(badge_caption(spec.path, self.derived))
            return
        default = format_default(self.default_spec())
        if len(default) > 14:
            default = default[:12] + "…"
        unit = f"{spec.unit} · " if spec.unit else ""
        self.caption.setText(f"{unit}def. {default}")

    def default_spec(self) -> FieldSpec:
        """The spec with the default plan's value (nested models have no own default)."""
        try:
            value = plan_default(self.doc.plan, self.spec.path)
        except KeyError:
            return self.spec
        return replace(self.spec, default=value)

    def _update_tooltip(self) -> None:
        tip = self.default_spec().tooltip()
        if self.derived is not None:
            tip = f"{badge_tooltip(self.derived)}<br><br>{tip}"
        if self.disabled_reason:
            tip = f"<b>Does not apply:</b> {self.disabled_reason}<br><br>{tip}"
        if self.error:
            tip = f"<b style='color:#d0302f'>{self.error}</b><br><br>{tip}"
        for w in (self.label, self.editor, self.caption):
            w.setToolTip(tip)

    def set_error(self, message: str | None) -> None:
        """Mark the field invalid with ``message`` under it (None: valid again)."""
        self.error = message
        self.editor.setStyleSheet(ERROR_STYLE if message else "")
        self.editor.setProperty("error_message", message or "")
        if message:
            ink = ERROR_INK["dark" if dark_palette() else "light"]
            self.message.setStyleSheet(f"color: {ink}; font-size: 8pt;")
            self.message.setText(message)
        self.message.setVisible(bool(message))
        self.doc.note_invalid(self.spec.path, message)
        self._update_tooltip()

    def defaults_moved(self) -> None:
        """A preset was applied: the caption's default is now its value
        (:mod:`gui.fields.preset_defaults`)."""
        self._caption_for = _UNSET
        self._update_caption()
        self._update_tooltip()

    def set_derived(self, derived: Derived | None) -> None:
        """Show (or stop showing) that the field's value comes from the stack."""
        if derived == self.derived:
            return
        self.derived = derived
        mark_from_stack(self.caption, derived is not None)
        self._caption_for = _UNSET
        self._update_caption()
        self._update_tooltip()

    def set_disabled_reason(self, reason: str | None) -> None:
        if reason == self.disabled_reason:
            return
        self.disabled_reason = reason
        for w in (self.label, self.editor, self.caption):
            w.setEnabled(reason is None)
        self._update_tooltip()


def mark_from_stack(caption: QLabel, on: bool) -> None:
    """Style a caption as a "from stack" badge (the page's style sheet reads the flag)."""
    if bool(caption.property("fromStack")) == on:
        return
    caption.setProperty("fromStack", on)
    caption.style().unpolish(caption)
    caption.style().polish(caption)


def add_to_grid(grid: QGridLayout, binding: FieldBinding) -> None:
    """Place label | editor | caption on the next row of a three-column grid, and the
    field's message (shown only while it is invalid) under the editor and caption."""
    row = grid.rowCount()
    grid.addWidget(binding.label, row, 0, Qt.AlignmentFlag.AlignVCenter)
    grid.addWidget(binding.editor, row, 1)
    grid.addWidget(binding.caption, row, 2)
    grid.addWidget(binding.message, row + 1, 1, 1, 2)
    binding.label.setBuddy(binding.editor)
