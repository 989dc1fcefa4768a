"""A scrolling input page built from plan sections, plus the wiring every tab shares.

Each tab lists which plan sections (or parts of them) it shows; the fields themselves
come from the sections' pydantic metadata, so new plan fields appear here on their own.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import replace

from pydantic import BaseModel
from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import (
    QFrame,
    QGridLayout,
    QGroupBox,
    QLabel,
    QScrollArea,
    QStyle,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from engine.sections.base import ByteRange
from gui.document import PlanDocument, messages_by_field
from gui.fields.band_field import BandFieldBinding, BandModeBinding
from gui.fields.fields import CAPTION_STYLE, STACK_CAPTION_STYLE, FieldBinding, add_to_grid
from gui.fields.fieldspec import FieldSpec, field_specs
from gui.fields.plan_view import plan_view
from gui.fields.stack_badge import derived_for

PAGE_STYLE = (
    f"QLabel#fieldCaption {{ {CAPTION_STYLE} }} "
    f'QLabel#fieldCaption[fromStack="true"] {{ {STACK_CAPTION_STYLE} }}'
)
"""One style sheet per page for every caption (one per label cost a style pass each)."""


class Collapsible(QWidget):
    """A titled block whose body can be folded away (advanced knobs start folded)."""

    def __init__(self, title: str, body: QWidget, expanded: bool, parent: QWidget) -> None:
        super().__init__(parent)
        self.button = QToolButton(self)
        self.button.setText(title)
        self.button.setCheckable(True)
        self.button.setChecked(expanded)
        self.button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.button.setStyleSheet("QToolButton { border: none; font-weight: 600; }")
        self.body = body
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.button)
        lay.addWidget(body)
        self.button.toggled.connect(self._toggle)
        self._toggle(expanded)

    def _toggle(self, on: bool) -> None:
        self.button.setArrowType(Qt.ArrowType.DownArrow if on else Qt.ArrowType.RightArrow)
        self.body.setVisible(on)


class TabPage(QScrollArea):
    """A tab of generated fields bound to the document.

    It scrolls vertically and is never narrower than its fields need
    (:meth:`minimumSizeHint`), so the splitter cannot squeeze a field or a button out of
    sight; a horizontal scroll bar appears only if the window itself is narrower still.
    """

    def __init__(self, doc: PlanDocument, units: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.doc, self.units = doc, units
        self.bindings: dict[str, FieldBinding] = {}
        self.bands: list[BandModeBinding] = []
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        inner = QWidget(self)
        self.column = QVBoxLayout(inner)
        self.column.setContentsMargins(8, 8, 8, 8)
        self.column.setSpacing(10)
        self.setWidget(inner)
        self._estimate_marked: set[str] = set()
        self._min_hint: QSize | None = None
        inner.setStyleSheet(PAGE_STYLE)
        doc.planChanged.connect(self.refresh)
        doc.fieldError.connect(self._field_error)
        doc.fieldOk.connect(self._field_ok)
        doc.estimateFailed.connect(self._estimate_failed)
        doc.estimateChanged.connect(self._estimate_ok)

    def minimumSizeHint(self) -> QSize:
        """The fields' width plus the scroll bar (measured once the page is built: Qt
        asks for it on every layout pass, and the fields' minimum never changes)."""
        if self._min_hint is None:
            widget = self.widget()
            inner = widget.minimumSizeHint() if widget is not None else QSize(0, 0)
            bar = self.style().pixelMetric(QStyle.PixelMetric.PM_ScrollBarExtent, None, self)
            self._min_hint = QSize(inner.width() + bar + 2 * self.frameWidth() + 2, 120)
        return self._min_hint

    def finish(self) -> None:
        """Call after the sections are added: pushes remaining space to the bottom."""
        self.column.addStretch(1)
        self._min_hint = None
        self.refresh()
        if self.doc.estimate_problems:  # built after the plan failed: mark its fields too
            self._estimate_failed(self.doc.estimate_error or "")

    # building --------------------------------------------------------------------
    def add_section(
        self,
        title: str,
        model: type[BaseModel],
        prefix: str,
        include: Iterable[str] | None = None,
        exclude: Iterable[str] = (),
        collapsed: bool = False,
    ) -> QGroupBox:
        """A group box with one row per field of ``model`` (nested models as sub-rows)."""
        box = QGroupBox(self.widget())
        grid = QGridLayout(box)
        grid.setColumnStretch(1, 1)
        grid.setHorizontalSpacing(8)
        grid.setVerticalSpacing(4)
        self._fill(grid, model, prefix, set(include) if include is not None else None, set(exclude))
        if collapsed:
            box.setTitle("")
            self.column.addWidget(Collapsible(title, box, False, self.widget() or self))
        else:
            box.setTitle(title)
            self.column.addWidget(box)
        return box

    def _fill(
        self,
        grid: QGridLayout,
        model: type[BaseModel],
        prefix: str,
        include: set[str] | None,
        exclude: set[str],
        in_bytes: bool = False,
        parent_help: str = "",
    ) -> None:
        for spec in field_specs(model, prefix):
            if in_bytes and spec.kind == "int":  # low/high of a byte range
                spec = replace(spec, kind="bytes", unit="bytes")
            if parent_help and not spec.description:  # a band's low/high: say what it is
                spec = replace(spec, description=parent_help)
            if (include is not None and spec.name not in include) or spec.name in exclude:
                continue
            if spec.kind == "section" and spec.model is not None:
                if spec.optional and spec.model is ByteRange:
                    self._band(grid, spec)
                    continue
                if spec.optional:
                    self._optional_summary(grid, spec.path, spec.label)
                    continue
                head = QLabel(f"<b>{spec.label}</b>", grid.parentWidget())
                head.setToolTip(spec.description)
                grid.addWidget(head, grid.rowCount(), 0, 1, 3)
                self._fill(
                    grid, spec.model, spec.path, None, set(), spec.unit == "bytes", spec.description
                )
                continue
            binding = FieldBinding(self.doc, spec, self.units, grid.parentWidget() or self)
            self.bindings[spec.path] = binding
            add_to_grid(grid, binding)

    def _band(self, grid: QGridLayout, spec: FieldSpec) -> None:
        """An optional byte band: auto / custom over its low and high fields."""
        parent = grid.parentWidget() or self
        mode = BandModeBinding(self.doc, spec, parent)
        mode.place(grid)
        self.bands.append(mode)
        for sub in field_specs(ByteRange, spec.path):
            sub = replace(sub, kind="bytes", unit="bytes")
            binding = BandFieldBinding(self.doc, sub, self.units, parent)
            self.bindings[sub.path] = binding
            add_to_grid(grid, binding)

    def _optional_summary(self, grid: QGridLayout, path: str, label: str) -> None:
        """Nested optional blocks (MoE, MLA) come from presets/imports; show them read-only."""
        text = QLabel(grid.parentWidget())
        text.setObjectName(f"summary:{path}")
        text.setWordWrap(True)
        text.setProperty("plan_path", path)
        row = grid.rowCount()
        grid.addWidget(QLabel(label, grid.parentWidget()), row, 0)
        grid.addWidget(text, row, 1, 1, 2)
        self.doc.planChanged.connect(lambda: self._show_summary(text, path))
        self._show_summary(text, path)

    def _show_summary(self, label: QLabel, path: str) -> None:
        value = self.doc.value(path)
        label.setText("none" if value is None else json.dumps(value)[:200])
        label.setToolTip(
            "Set by a model preset or import" if value is None else json.dumps(value, indent=1)
        )

    # reacting ----------------------------------------------------------------------
    def refresh(self) -> None:
        """Show the plan: each field's value and whether it applies (the plan's values
        and reasons are computed once per plan for every tab, not once per field)."""
        view = plan_view(self.doc.plan)
        presets = (self.doc.plan.model.preset, self.doc.plan.hardware.accelerator)
        if presets != getattr(self, "_presets", presets):
            for binding in self.bindings.values():
                binding.defaults_moved()  # the captions' defaults are the new preset's
        self._presets = presets
        for path, binding in self.bindings.items():
            binding.set_derived(derived_for(view.derived, path))
            binding.refresh(value=view.value(path))
            binding.set_disabled_reason(view.reason(path))
        for band in self.bands:
            band.refresh(view)

    def shutdown(self) -> None:
        """Stop the page's background work (the window is closing)."""

    def set_units(self, units: str) -> None:
        self.units = units
        for binding in self.bindings.values():
            if binding.spec.kind == "bytes":
                binding.set_units(units)

    def _field_error(self, path: str, message: str) -> None:
        if path in self.bindings:
            self.bindings[path].set_error(message)

    def _field_ok(self, path: str) -> None:
        if path in self.bindings and path not in self._estimate_marked:
            self.bindings[path].set_error(None)

    def _estimate_failed(self, message: str) -> None:
        """Mark the fields the engine's problems name, each with its own messages."""
        self._estimate_ok()
        for path, text in messages_by_field(self.doc.estimate_problems).items():
            if path in self.bindings:
                self.bindings[path].set_error(text)
                self._estimate_marked.add(path)

    def _estimate_ok(self) -> None:
        for path in self._estimate_marked:
            if path in self.bindings:
                self.bindings[path].set_error(None)
        self._estimate_marked.clear()
