"""The Sweep tab: vary one input over a range and chart peak HBM against it.

The analyst picks an input (sequence length, micro-batch, GPU count as DP, LoRA rank,
TP, … or types any numeric field path), a range (``1024:32768:x2``, ``8:64:+8`` or a
list) and presses Run. The sweep runs on a worker (``gui.workers.workers.TaskRunner``) with a
progress bar and Cancel — a DeepSeek-V3 sweep takes seconds — while typing elsewhere
never waits. The result is the chart of :mod:`gui.sweep.sweep_chart` and a table with every
value's peak, limit, capacity and verdict (or why the value is invalid). A sweep is of
the plan as it was when Run was pressed; an edit afterwards marks it as of an earlier
plan, and the report includes it only while it is of the plan reported.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSplitter,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from engine.estimate import VERDICT_WORDS
from engine.plan import Plan
from engine.units import fmt_bytes, fmt_range
from engine.whatif.sweep import Sweep, SweepSpec, SweepSpecError, parse_vary, show_value, sweep
from gui.document import PlanDocument
from gui.sweep.sweep_chart import SweepChart
from gui.views.grid import read_only_grid
from gui.workers.workers import TaskRunner

SWEEP_INPUTS: tuple[tuple[str, str, str], ...] = (
    ("Sequence length", "batch.seq_len", "1024:131072:x2"),
    ("Micro-batch", "batch.micro_batch", "1:32:x2"),
    ("GPU count (data-parallel ranks)", "parallelism.dp", "1:64:x2"),
    ("LoRA rank", "method.lora.rank", "4:512:x2"),
    ("Tensor parallel (TP)", "parallelism.tp", "1:8:x2"),
    ("Pipeline stages (PP)", "parallelism.pp", "1:16:x2"),
    ("Context parallel (CP)", "parallelism.cp", "1:8:x2"),
    ("Gradient accumulation", "batch.grad_accum", "1:16:x2"),
    ("Headroom policy (%)", "policy.headroom_percent", "0:30:+5"),
)
"""(label, field path, suggested range) of the inputs offered first; any numeric field
path can be typed instead."""

COLUMNS = ("Value", "Peak HBM per rank (low–high)", "Limit", "Capacity", "Verdict", "Why")


class SweepPanel(QWidget):
    """Input and range, Run / Cancel with progress, the chart and the table."""

    def __init__(self, doc: PlanDocument, units: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("sweepPanel")
        self.doc, self.units = doc, units
        self.result: Sweep | None = None
        self.runner = TaskRunner(self)
        self.runner.progress.connect(self._progress)
        self.runner.finished.connect(self._finished)
        self.runner.failed.connect(self._failed)
        self._build()
        self.doc.estimateChanged.connect(self._mark_stale)

    def _build(self) -> None:
        self.field = QComboBox(self)
        self.field.setObjectName("sweepField")
        self.field.setEditable(True)
        self.field.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.field.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.field.setMinimumContentsLength(14)  # narrow windows: the tab never forces width
        for label, path, values in SWEEP_INPUTS:
            self.field.addItem(f"{label} — {path}", (path, values))
        self.field.setToolTip("An input from the list, or type any numeric field path")
        self.field.activated.connect(self._suggest)
        self.values = QLineEdit(SWEEP_INPUTS[0][2], self)
        self.values.setObjectName("sweepValues")
        self.values.setToolTip("start:stop:xK (geometric), start:stop:+K (linear) or a list a,b,c")
        self.values.returnPressed.connect(self.run)
        self.values.setMinimumWidth(110)
        self.run_button = QPushButton("&Run sweep", self)
        self.run_button.clicked.connect(self.run)
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self.runner.cancel)
        self.progress = QProgressBar(self)
        self.progress.setObjectName("sweepProgress")
        self.progress.setVisible(False)
        self.progress.setMaximumWidth(160)
        self.progress.setMinimumWidth(60)
        self.include = QCheckBox("Include in the report", self)
        self.include.setToolTip("File → Export Report adds this sweep's chart and table")
        self.include.setEnabled(False)
        top = QHBoxLayout()
        top.addWidget(QLabel("Vary", self))
        top.addWidget(self.field, 3)
        top.addWidget(QLabel("over", self))
        top.addWidget(self.values, 2)
        self.status = QLabel("Choose an input and a range, then Run.", self)
        self.status.setObjectName("sweepStatus")
        self.status.setWordWrap(True)
        bottom = QHBoxLayout()
        for w in (self.run_button, self.cancel_button, self.progress):
            bottom.addWidget(w)
        bottom.addWidget(self.status, 1)
        bottom.addWidget(self.include)
        self.chart = SweepChart(self)
        self.table = read_only_grid(
            self, "sweepTable", COLUMNS, QHeaderView.ResizeMode.ResizeToContents
        )
        split = QSplitter(Qt.Orientation.Vertical, self)
        split.addWidget(self.chart)
        split.addWidget(self.table)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        body = QWidget(self)
        col = QVBoxLayout(body)
        col.setContentsMargins(4, 4, 4, 4)
        col.addLayout(top)
        col.addLayout(bottom)
        col.addWidget(split, 1)
        scroll = QScrollArea(self)  # a short window scrolls the tab instead of clipping it
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        scroll.setWidget(body)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(scroll)

    # running ---------------------------------------------------------------------
    def _suggest(self, index: int) -> None:
        data = self.field.itemData(index)
        if isinstance(data, tuple):
            self.values.setText(data[1])

    def field_path(self) -> str:
        """The chosen path: the item's, or the text typed (``Label — path`` or a path)."""
        text = self.field.currentText().strip()
        index = self.field.findText(text)
        data = self.field.itemData(index) if index >= 0 else None
        if isinstance(data, tuple):
            return str(data[0])
        return text.rsplit("—", 1)[-1].strip()

    def spec(self) -> SweepSpec | None:
        """The sweep asked for, or None (and the reason shown) when it is not valid."""
        try:
            return parse_vary(f"{self.field_path()}={self.values.text()}", self.doc.plan)
        except SweepSpecError as exc:
            self._say(f"Cannot sweep: {exc}", error=True)
            return None

    def run(self) -> bool:
        """Start the sweep of the current plan on the worker (False: not valid)."""
        self.doc.flush()
        spec = self.spec()
        if spec is None:
            return False
        plan: Plan = self.doc.plan
        self.runner.start(lambda progress: sweep(plan, spec, progress=progress))
        self.progress.setRange(0, len(spec.values))
        self.progress.setValue(0)
        self.progress.setVisible(True)
        self.cancel_button.setEnabled(True)
        self._say(f"Sweeping {spec.path} over {len(spec.values)} values…")
        return True

    def cancel(self) -> None:
        self.runner.cancel()

    def _progress(self, done: int, total: int) -> None:
        self.progress.setRange(0, total)
        self.progress.setValue(done)

    def _finished(self, result: object) -> None:
        self._idle()
        if not isinstance(result, Sweep):
            return
        self.result = result
        self.include.setEnabled(True)
        self.chart.show_sweep(result, self.units)
        self._fill(result)
        note = (
            f" Cancelled after {len(result.points)} of {result.requested} values."
            if result.cancelled
            else ""
        )
        self._say(f"{result.summary()}.{note}")
        self._mark_stale()

    def _failed(self, message: str) -> None:
        self._idle()
        self._say(f"The sweep failed: {message}", error=True)

    def _idle(self) -> None:
        self.progress.setVisible(False)
        self.cancel_button.setEnabled(False)

    def _say(self, text: str, error: bool = False) -> None:
        self.status.setText(text)
        self.status.setStyleSheet("color: #C5221F;" if error else "")

    # showing ---------------------------------------------------------------------
    def _fill(self, s: Sweep) -> None:
        u: Any = self.units
        self.table.setRowCount(len(s.points))
        boundary = s.boundary
        for i, p in enumerate(s.points):
            mark = " ◀" if boundary is not None and boundary.index == i else ""
            own = " ▲" if p.value == s.base_value else ""
            cells = [show_value(p.value) + own + mark]
            if p.ok:
                cells += [
                    fmt_range(p.low or 0, p.high or 0, u),
                    fmt_bytes(p.limit or 0, u),
                    fmt_bytes(p.capacity or 0, u),
                    VERDICT_WORDS[p.verdict or "fits"],
                    p.reason,
                ]
            else:
                cells += ["—", "—", "—", "invalid", p.reason]
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setToolTip(text)
                self.table.setItem(i, c, item)

    def _mark_stale(self) -> None:
        s = self.result
        est = self.doc.estimate
        if s is None or est is None:
            return
        current = s.base_hash == est.config_hash and not self.doc.stale
        self.include.setEnabled(current)
        if not current:
            self.include.setChecked(False)
            self._say(f"{s.summary()}. (Swept an earlier version of the plan: Run again.)")

    def set_units(self, units: str) -> None:
        self.units = units
        if self.result is not None:
            self.chart.show_sweep(self.result, units)
            self._fill(self.result)

    def for_report(self) -> Sweep | None:
        """The sweep to include in the report: asked for, and of the plan on screen."""
        s, est = self.result, self.doc.estimate
        if s is None or est is None or not self.include.isChecked():
            return None
        return s if s.base_hash == est.config_hash else None

    def shutdown(self) -> None:
        self.runner.shutdown()
