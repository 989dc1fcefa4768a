"""Writing the report without the window waiting, with progress and Cancel.

A report costs about three seconds: the plan's slow analysis parts (GPU counts,
diagnostics, sensitivity, what fits), laying out ~20 pages of text and painting them.
:class:`ReportExport` runs it in two steps so the window keeps answering:

1. on a worker thread: the analysis parts, one by one (each a progress step), then
   :func:`gather` (cheap once they are computed) and the report's HTML
   (:func:`report_html`: string building, where the engine's caches of this process
   are warm — the published-suite check it quotes costs ~0.4 s once per process).
   The thread makes no QObject (Qt value types such as QColor at most), and its
   progress signals are emitted with the GIL released (PySide's
   ``MetaFunction::call``), so it cannot meet the GUI thread on a Qt mutex;
2. in a child process (:mod:`gui.report.paint_process`): the charts recorded, the text
   laid out and the pages painted onto a temporary file next to the target (a progress
   step per page), moved into place when done, so a cancelled or failed export leaves
   no half-written PDF behind. Not on a thread: a QTextDocument made there while the
   GUI thread waits for the GIL under a Qt connection mutex deadlocked the window (the
   module docstring of :mod:`gui.report.paint_process` says how).

A printer is painted on the GUI thread in step 2 (printer back ends are not meant for
other threads, and a printer cannot be handed to another process). One export runs at
a time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QPagedPaintDevice

from engine.analysis import analysis
from engine.planfile import PlanFile
from gui.report.builder import report_html
from gui.report.content import ReportContent, gather
from gui.report.paint_process import PdfPainter
from gui.report.pdf import PageName, print_report
from gui.workers.analysis_worker import WINDOW_PARTS
from gui.workers.workers import TaskRunner

CANCELLED = "cancelled"
"""What a step returns when the user cancelled it (a result, not an error)."""

ProgressFn = Callable[[int, int], bool]


@dataclass(frozen=True)
class Gathered:
    """What step 1 hands to step 2: the content and its HTML (``report_html``)."""

    content: ReportContent
    html: str


def gather_step(pf: PlanFile, units: Any, extras: dict[str, Any], progress: ProgressFn) -> object:
    """Step 1: the analysis parts one at a time, then the report's content and HTML."""
    a = analysis(pf.plan)
    total = len(WINDOW_PARTS) + 1
    for i, part in enumerate(WINDOW_PARTS):
        if not progress(i, total):
            return CANCELLED
        try:
            a.get(part)
        except Exception:
            break
    if not progress(total - 1, total):
        return CANCELLED
    content = gather(pf, units, **extras)
    return Gathered(content, report_html(content))


class ReportExport(QObject):
    """One report being written; signals arrive on the GUI thread."""

    progress = Signal(str, int, int)  # what is being done, done, total
    written = Signal(str, int)  # path (or "printer"), pages
    failed = Signal(str)
    cancelled = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.runner = TaskRunner(self)
        self.runner.progress.connect(self._progress)
        self.runner.finished.connect(self._step_done)
        self.runner.failed.connect(self._failed)
        self.painter = PdfPainter(self)
        self.painter.progress.connect(self._progress)
        self.painter.written.connect(self._written)
        self.painter.failed.connect(self._failed)
        self.painter.cancelled.connect(self._cancelled)
        self._step = ""
        self._job: dict[str, Any] = {}

    @property
    def busy(self) -> bool:
        return bool(self._step)

    def start(
        self,
        pf: PlanFile,
        units: Any,
        extras: dict[str, Any],
        path: str | None,
        page: PageName,
        printer: QPagedPaintDevice | None = None,
    ) -> None:
        """Write the report of ``pf`` to ``path`` (or paint it on ``printer``)."""
        self.cancel()
        self._job = {"path": path, "page": page, "printer": printer}
        self._step = "gather"
        if path is not None:
            try:  # the painter starts now, while the figures are gathered
                self.painter.prepare(path)
            except OSError as exc:  # a FIFO or device where the PDF should go
                self._failed(f"{type(exc).__name__}: {exc}")
                return
        self.progress.emit("Computing the report's figures…", 0, 1)
        self.runner.start(lambda p: gather_step(pf, units, extras, p))

    def cancel(self) -> None:
        """Stop at the next analysis part, or kill the painter; nothing is written."""
        if not self._step:
            return
        if self._step == "paint":
            self.painter.cancel()  # its file removed; it says ``cancelled`` at once
            return
        self.runner.cancel()
        self.painter.shutdown()  # waiting for its job: it gets none
        self._cancelled()  # now: a result still to come finds no step and is dropped

    def _progress(self, done: int, total: int) -> None:
        what = "Computing the report's figures…" if self._step == "gather" else "Writing pages…"
        self.progress.emit(what, done, total)

    def _step_done(self, result: object) -> None:
        if self._step != "gather":  # it failed meanwhile (its painter died): said already
            return
        if result == CANCELLED:
            self._cancelled()
        elif isinstance(result, Gathered):
            self._paint(result)

    def _paint(self, gathered: Gathered) -> None:
        """Step 2 (see the module docstring)."""
        printer = self._job.get("printer")
        if printer is not None:
            try:
                pages = print_report(gathered.content, printer, gathered.html)
            except OSError as exc:
                self._failed(str(exc))
                return
            self._finish()
            self.written.emit("printer", pages)
            return
        self._step = "paint"
        self.progress.emit("Writing pages…", 0, 1)
        self.painter.send(gathered.content, gathered.html, self._job["page"])

    def _written(self, pages: int) -> None:
        path = str(self._job.get("path"))
        self._finish()
        self.written.emit(path, pages)

    def _failed(self, message: str) -> None:
        self.runner.cancel()  # the painter died while the figures were gathered
        self.painter.shutdown()  # the figures failed: the painter waits in vain
        self._finish()
        self.failed.emit(message)

    def _cancelled(self) -> None:
        self._finish()
        self.cancelled.emit()

    def _finish(self) -> None:
        self._step = ""
        self._job = {}

    def shutdown(self) -> None:
        self.painter.shutdown()
        self.runner.shutdown()
