"""Measured runs in the desktop app: attach probe records, compare, calibrate.

Records live in the plan file (``measurements``); attaching them is an undoable edit of
the document like any other. The comparison is the engine's reconciliation text, and
calibration is shown as explicit before → after changes that the user applies (one undo
step) or not — never a silent correction.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtGui import QFont, QFontDatabase
from PySide6.QtWidgets import QFileDialog, QMessageBox, QPlainTextEdit, QWidget

from engine.validation.calibrate import propose
from engine.validation.identity import workload_hash
from engine.validation.reconcile import reconcile
from engine.validation.records import MeasuredRecord, RecordError, load_records, stored_records
from engine.validation.report import render
from gui.document import PlanDocument

NO_RECORDS = (
    "No measured runs are attached to this plan.\n\n"
    "To validate it before buying: run `memplan probe PLAN -o memplan_probe.py`, drop the "
    "probe into the training script, run a representative micro-batch, then attach the "
    "JSON records it writes with Measured runs → Attach records…"
)


def records_of(doc: PlanDocument) -> list[MeasuredRecord]:
    return stored_records(doc.measurements)


def comparison_text(doc: PlanDocument, units: str) -> str:
    """Estimate vs every attached record, or how to get records."""
    if not doc.measurements:
        return NO_RECORDS
    if doc.estimate is None:
        return "The plan cannot be computed, so there is nothing to compare the records with."
    rec = reconcile(doc.estimate, records_of(doc), workload_hash(doc.plan))
    return render(rec, units)  # type: ignore[arg-type]


class MeasuredView(QPlainTextEdit):
    """Read-only, monospaced reconciliation text (it is a table)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("measuredRuns")
        self.setReadOnly(True)
        font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        font.setStyleHint(QFont.StyleHint.Monospace)
        self.setFont(font)

    def show_document(self, doc: PlanDocument, units: str) -> None:
        self.setPlainText(comparison_text(doc, units))


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
