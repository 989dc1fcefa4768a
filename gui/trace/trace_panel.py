"""The Measured tab's trace controls: Trace this plan, Cancel, progress, and the outcome.

Before anything runs the button says whether a trace is possible: without the
``memplan[trace]`` extra it is disabled with the install line as its tooltip; for a plan
the trace cannot run faithfully (DeepSpeed, Megatron, offload, QLoRA …) it is disabled
and the support check's reason is shown. A trace runs in a worker process
(:class:`gui.trace.trace_process.TraceProcess`) while the window stays responsive; its record
is attached to the document as one undoable edit, so Save writes it into the file. The
outcome line gives the allocated peak and, beside it, the allocator replay's reserved
peak (``engine/trace/reserved.py``).
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QPushButton, QWidget

from engine.trace import extra
from engine.trace.record import stored_replay
from engine.trace.support import refusal
from engine.units import UnitChoice, fmt_bytes
from engine.validation.records import MeasuredRecord
from gui.document import PlanDocument
from gui.trace.trace_process import TraceProcess

TRACE_TIP = (
    "Build this plan's model with transformers on fake tensors and run two training steps "
    "under PyTorch's memory trackers in a separate process (no GPU, no weights): the "
    "allocated peak by category and phase, beside the ledger"
)
UNDO_TEXT = "Trace this plan"


class TracePanel(QWidget):
    """One row: the button, Cancel, a progress bar and a status line."""

    traced = Signal(object)  # the MeasuredRecord attached to the document

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.doc: PlanDocument | None = None
        self.process = TraceProcess(self)
        self.process.progress.connect(self._progress)
        self.process.finished.connect(self._finished)
        self.process.failed.connect(lambda why: self._ended(f"Trace failed: {why}"))
        self.process.cancelled.connect(lambda: self._ended("Trace cancelled."))
        self.button = QPushButton("Trace this plan", self)
        self.button.setObjectName("traceButton")
        self.button.clicked.connect(self.start)
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.setObjectName("traceCancel")
        self.cancel_button.clicked.connect(self.process.cancel)
        self.cancel_button.setEnabled(False)
        self.bar = QProgressBar(self)
        self.bar.setObjectName("traceProgress")
        self.bar.setMaximumWidth(160)
        self.bar.setTextVisible(True)
        self.bar.setVisible(False)
        self.status = QLabel(self)
        self.status.setObjectName("traceStatus")
        self.status.setWordWrap(True)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.button)
        row.addWidget(self.cancel_button)
        row.addWidget(self.bar)
        row.addWidget(self.status, 1)
        self._outcome = ""  # the last trace's outcome, kept until the next one starts
        self.units: UnitChoice = "both"
        self._replaced = False  # the document was replaced while the trace ran
        self._extra: dict[tuple[str, ...], str | None] = {}  # extra_problem() by missing

    @property
    def running(self) -> bool:
        return self.process.running

    def _extra_problem(self) -> str | None:
        """:func:`extra.extra_problem`, asked again only when the importable trace packages
        change: it reads the installed packages' metadata (≈ 20 ms), and the panel
        refreshes on every edit."""
        key = tuple(extra.missing_packages())
        if key not in self._extra:
            self._extra[key] = extra.extra_problem()
        return self._extra[key]

    def unavailable(self) -> str | None:
        """Why a trace cannot start now (the extra, the plan, a failed estimate)."""
        problem = self._extra_problem()
        if problem is not None:
            return problem
        if self.doc is None:
            return "no plan"
        if self.doc.stale:
            return "the plan cannot be computed, so there is nothing to trace it against"
        reason = refusal(self.doc.plan)
        return None if reason is None else f"Cannot trace this plan: {reason}"

    def refresh(self, doc: PlanDocument, units: UnitChoice = "both") -> None:
        """Follow the document: enable the button only for a plan that can be traced."""
        if doc is not self.doc:
            doc.pathChanged.connect(self._path_changed)
        self.doc, self.units = doc, units
        if self.running:
            return
        why = self.unavailable()
        self.button.setEnabled(why is None)
        self.button.setToolTip(why or TRACE_TIP)
        self.status.setText(why or self._outcome)

    def start(self) -> bool:
        """Trace the document's plan now (False, and nothing runs, when it cannot)."""
        if self.doc is None or self.running or self.unavailable() is not None:
            return False
        self.process.start(self.doc.to_planfile())
        self._replaced = False
        self.button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        self.bar.setRange(0, 0)  # busy until the first progress line
        self.bar.setVisible(True)
        self.status.setText("Starting the trace process (torch loads in a few seconds)…")
        return True

    def cancel(self) -> None:
        self.process.cancel()

    def shutdown(self) -> None:
        """Stop a running trace (the window is closing)."""
        self.process.shutdown()

    def _progress(self, done: int, total: int, message: str) -> None:
        self.bar.setRange(0, total)
        self.bar.setValue(done)
        self.status.setText(message)

    def _path_changed(self) -> None:
        """Another file (or a new plan) replaced the document: its undo history is gone.
        (A Save As keeps the history, so it does not count.)"""
        if self.running and self.doc is not None and self.doc.undo_stack.count() == 0:
            self._replaced = True

    def _finished(self, record: MeasuredRecord) -> None:
        doc = self.doc
        if doc is None:
            return
        if self._replaced and record.config_hash != doc.plan.config_hash():
            self._ended("The trace finished after another plan was opened: its record was dropped.")
            return
        doc.set_measurements((*doc.measurements, record.to_json()), UNDO_TEXT)
        seconds = record.window.seconds or 0.0
        peak = fmt_bytes(record.max_allocated_bytes or 0, self.units)
        text = f"Traced in {seconds:.1f} s: peak allocated {peak}"
        replayed = stored_replay(record)
        if replayed is not None:
            reserved = fmt_bytes(replayed.result.peak_reserved, self.units)
            text += f", peak reserved {reserved} (allocator replay)"
        text += " (simulated); saved in the plan"
        if record.config_hash != doc.plan.config_hash():
            text += " — the plan changed during the trace: the record is for the version traced"
        self._ended(text + ".")
        self.traced.emit(record)

    def _ended(self, outcome: str) -> None:
        self._outcome = outcome
        self.bar.setVisible(False)
        self.cancel_button.setEnabled(False)
        if self.doc is not None:
            self.refresh(self.doc, self.units)
        self.status.setText(outcome)
