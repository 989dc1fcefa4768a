"""Measured runs in the desktop app: attach probe records, trace the plan, compare,
calibrate.

Records live in the plan file (``measurements``); attaching them — or a trace's record —
is an undoable edit of the document like any other. The tab shows the newest trace
(a simulated measurement: :mod:`gui.trace.trace_panel` runs it) as a chart of traced vs
estimated per ledger group and phase with the sentences saying where they differ, then
the engine's reconciliation of every record. Calibration is shown as explicit
before → after changes that the user applies (one undo step) or not — never a silent
correction.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QFontDatabase
from PySide6.QtWidgets import (
    QFileDialog,
    QMessageBox,
    QPlainTextEdit,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from engine.trace.compare import Comparison, compare
from engine.trace.record import latest_trace, result_from_record, stored_replay
from engine.trace.reserved import TraceReplay
from engine.trace.text import summary
from engine.units import UnitChoice
from engine.validation.calibrate import propose
from engine.validation.identity import workload_hash
from engine.validation.reconcile import reconcile
from engine.validation.records import MeasuredRecord, RecordError, load_records, stored_records
from engine.validation.report import render
from gui.document import PlanDocument
from gui.trace.trace_chart import TraceChart
from gui.trace.trace_panel import TracePanel

NO_RECORDS = (
    "No measured runs are attached to this plan.\n\n"
    "Without a GPU: Trace this plan (above) runs the plan's training step on fake tensors "
    "under PyTorch's memory trackers and keeps the result as a simulated measurement.\n\n"
    "To validate it before buying: run `memplan probe PLAN -o memplan_probe.py`, drop the "
    "probe into the training script, run a representative micro-batch, then attach the "
    "JSON records it writes with Measured runs → Attach records…"
)


def records_of(doc: PlanDocument) -> list[MeasuredRecord]:
    return stored_records(doc.measurements)


def trace_comparison(
    doc: PlanDocument, units: UnitChoice
) -> tuple[Comparison | None, str, TraceReplay | None]:
    """The newest trace against the plan's estimate: the chart's data, its text and the
    allocator replay it carries."""
    if doc.estimate is None or not doc.measurements:
        return None, "", None
    try:
        record = latest_trace(records_of(doc), doc.estimate.config_hash)
        if record is None:
            return None, "", None
        result = result_from_record(record)
    except RecordError as exc:
        return None, f"The stored trace cannot be shown: {exc}", None
    cmp = compare(result, doc.estimate)
    replayed = stored_replay(record)
    res = doc.estimate.heaviest.reserved_peak
    text = summary(
        result,
        cmp,
        record.config_hash,
        doc.estimate.config_hash,
        units,
        replayed,
        (res.low, res.high),
    )
    return cmp, text, replayed


def comparison_text(doc: PlanDocument, units: str) -> str:
    """Estimate vs every attached record, or how to get records."""
    if not doc.measurements:
        return NO_RECORDS
    if doc.estimate is None:
        return "The plan cannot be computed, so there is nothing to compare the records with."
    try:
        records = records_of(doc)
    except RecordError as exc:
        return f"The attached records cannot be read: {exc}"
    rec = reconcile(doc.estimate, records, workload_hash(doc.plan))
    return render(rec, units)  # type: ignore[arg-type]


class MeasuredView(QWidget):
    """The Measured tab: trace controls, the trace chart, then the reconciliation text
    (read-only and monospaced: it is a table)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.trace = TracePanel(self)
        self.chart = TraceChart(self)
        self.chart.setVisible(False)
        self.text = QPlainTextEdit(self)
        self.text.setObjectName("measuredRuns")
        self.text.setReadOnly(True)
        font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        font.setStyleHint(QFont.StyleHint.Monospace)
        self.text.setFont(font)
        self.split = QSplitter(Qt.Orientation.Vertical, self)
        self.split.addWidget(self.chart)
        self.split.addWidget(self.text)
        self.split.setSizes([180, 150])  # the text scrolls; the divider moves
        self.split.setChildrenCollapsible(False)
        col = QVBoxLayout(self)
        col.setContentsMargins(2, 2, 2, 2)
        col.setSpacing(2)
        col.addWidget(self.trace)
        col.addWidget(self.split, 1)

    def show_document(self, doc: PlanDocument, units: str) -> None:
        u: UnitChoice = units  # type: ignore[assignment]
        self.trace.refresh(doc, u)
        cmp, traced, replayed = trace_comparison(doc, u)
        self.chart.show_comparison(cmp, units, replayed)
        text = comparison_text(doc, units)
        self.text.setPlainText(f"{traced}\n\n{text}" if traced else text)

    def toPlainText(self) -> str:
        return self.text.toPlainText()

    def shutdown(self) -> None:
        """Stop a running trace (the window is closing)."""
        self.trace.shutdown()


def attach_paths(parent: QWidget, doc: PlanDocument, paths: list[str]) -> int:
    """Read record files (or folders) and attach them; returns how many were new."""
    records: list[MeasuredRecord] = []
    try:
        for path in paths:
            records.extend(load_records(Path(path)))
    except (RecordError, OSError, ValueError) as exc:
        QMessageBox.warning(parent, "Cannot read the records", str(exc))
        return 0
    stored = list(doc.measurements)
    new = [r.to_json() for r in records]
    added = [d for d in new if d not in stored]
    if added:
        doc.set_measurements((*stored, *added), f"Attach {len(added)} measured record(s)")
    return len(added)


def ask_attach(parent: QWidget, doc: PlanDocument) -> int:
    paths, _ = QFileDialog.getOpenFileNames(
        parent, "Measured records (probe JSON)", "", "Probe records (*.json *.jsonl);;All files (*)"
    )
    return attach_paths(parent, doc, paths) if paths else 0


def calibrate(parent: QWidget, doc: PlanDocument, confirm: bool = True) -> bool:
    """Propose narrowed ranges from the attached records; apply them as one undo step."""
    if not doc.measurements:
        QMessageBox.information(parent, "Calibrate", NO_RECORDS)
        return False
    cal = propose(doc.plan, records_of(doc))
    if not cal.proposals:
        QMessageBox.information(
            parent,
            "Calibrate",
            "The records need no change to the plan's ranges.\n\n" + "\n".join(cal.notes),
        )
        return False
    lines = [f"• {p.path}: {p.before} → {p.after}\n    {p.evidence}" for p in cal.proposals]
    lines += [f"WARNING: {w}" for w in cal.warnings]
    lines += [f"note: {n}" for n in cal.notes]
    text = "Apply these changes to the plan? (Edit → Undo reverts them.)\n\n" + "\n".join(lines)
    if confirm:
        answer = QMessageBox.question(parent, "Calibrate from measured records", text)
        if answer != QMessageBox.StandardButton.Yes:
            return False
    return doc.set_many(cal.changes, "Calibrate from measured records")
