"""The slow parts of the plan on screen (GPU counts, diagnostics, fit, sensitivity, the
fit levers' summaries).

They come from ``engine.analysis`` in a worker process once the edits settle
(:data:`SLOW_VIEWS_DELAY_MS` after the last redraw), each tagged with the config hash of
the plan it was computed for; a part is kept only if that plan's estimate is still the
one on screen. The window asks :class:`AnalysisParts` for what has arrived and is told by
:attr:`AnalysisParts.arrived` when another part does, so a keystroke only costs the
cheap redraw and the GUI thread never searches.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, QTimer, Signal

from gui.document import PlanDocument
from gui.workers.analysis_worker import AnalysisWorker

SLOW_VIEWS_DELAY_MS = 150
"""Idle time after the last edit before the layout search and suggestions rerun."""

SHOWN_PARTS = ("counts", "diagnosis", "fit", "lever_summaries")
"""The parts the window shows (sensitivity is for the report: computed last)."""


class AnalysisParts(QObject):
    """The parts that have arrived for the estimate on screen."""

    arrived = Signal(str)  # the part's name
    searching = Signal()  # a search for the plan on screen has started
    failed = Signal(str)  # the worker process stopped: why (the next edit starts anew)

    def __init__(self, doc: PlanDocument, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.doc = doc
        self.key = ""  # config hash the parts below were computed for
        self.parts: dict[str, object] = {}
        self.worker = AnalysisWorker(self)
        self.worker.partReady.connect(self._part_ready)
        self.worker.failed.connect(self.failed)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(SLOW_VIEWS_DELAY_MS)
        self._timer.timeout.connect(self._start)
        self._held = True  # until the window is on screen: see release()

    def follow(self, config_hash: str) -> None:
        """The estimate on screen is now ``config_hash``'s: forget other plans' parts and
        search once the edits settle."""
        if self.key != config_hash:
            self.key, self.parts = config_hash, {}
        if not self._held:
            self._timer.start()

    def release(self) -> None:
        """The window is shown: start searching (the first search starts the worker
        process, whose start-up would otherwise compete with the window's own for the
        CPU before the user sees anything). Idempotent."""
        if self._held:
            self._held = False
            self._timer.start()

    def _start(self) -> None:
        est = self.doc.estimate
        if est is None or self.doc.pending or self.doc.stale:
            return
        self.searching.emit()
        if all(p in self.parts for p in SHOWN_PARTS):
            return  # a redraw of the same plan (units, palette): nothing to search
        self.worker.submit(self.doc.plan)

    def _part_ready(self, key: str, part: str, value: object) -> None:
        """One part for the plan of hash ``key``: dropped unless that plan's estimate is
        the one on screen."""
        est = self.doc.estimate
        if est is None or self.doc.stale or key != est.config_hash or key != self.key:
            return
        self.parts[part] = value
        self.arrived.emit(part)

    def shutdown(self) -> None:
        self._timer.stop()
        self.worker.shutdown()
