"""Writing the report off the GUI thread, with progress and Cancel.

A report costs about three seconds: the plan's slow analysis parts (GPU counts,
diagnostics, sensitivity, what fits), laying out ~20 pages of text and painting them.
:class:`ReportExport` runs it in three steps so the window keeps answering:

1. on a worker thread: the analysis parts, one by one (each a progress step), then
   :func:`gather` (cheap once they are computed);
2. on the GUI thread: the ledger and stage charts recorded (bare QPainter drawings
   from the window's chart data, a few milliseconds);
3. on a worker thread again: the text layout and the pages, painted onto a temporary
   file next to the target (a progress step per page) and moved into place when done,
   so a cancelled or failed export leaves no half-written PDF behind.

A printer is painted on the GUI thread in step 3 (printer back ends are not meant for
other threads); steps 1 and 2 are the same. One export runs at a time.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QPagedPaintDevice

from engine.analysis import analysis
from engine.fileio.atomic import refuse_special
from engine.planfile import PlanFile
from gui.report.charts import Recorded, record_screen_charts
from gui.report.content import ReportContent, gather
from gui.report.pdf import PageName, ReportCancelled, print_report, write_pdf
from gui.workers.analysis_worker import WINDOW_PARTS
from gui.workers.workers import TaskRunner

CANCELLED = "cancelled"
"""What a step returns when the user cancelled it (a result, not an error)."""

ProgressFn = Callable[[int, int], bool]


def gather_step(pf: PlanFile, units: Any, extras: dict[str, Any], progress: ProgressFn) -> object:
    """Step 1: the analysis parts one at a time, then the report's content."""
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
    return gather(pf, units, **extras)


def paint_step(
    content: ReportContent,
    path: str,
    page: PageName,
    recorded: dict[str, Recorded],
    progress: ProgressFn,
) -> object:
    """Step 3: lay out and paint into a temporary file, then move it onto ``path``."""
    target = Path(path)
    refuse_special(target)  # the temp file is renamed over it: never over a FIFO or device
    temp = target.with_name(f".{target.name}.part-{os.getpid()}")
    try:
        pages = write_pdf(content, temp, page, recorded, progress)
    except ReportCancelled:
        temp.unlink(missing_ok=True)
        return CANCELLED
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    os.replace(temp, target)
    return pages


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
        self.progress.emit("Computing the report's figures…", 0, 1)
        self.runner.start(lambda p: gather_step(pf, units, extras, p))

    def cancel(self) -> None:
        """Stop at the next analysis part or page; nothing is written."""
        if not self._step:
            return
        self.runner.cancel()
        if not self.runner.busy:  # it had not started: no result will come
            self._finish()
            self.cancelled.emit()

    def _progress(self, done: int, total: int) -> None:
        what = "Computing the report's figures…" if self._step == "gather" else "Writing pages…"
        self.progress.emit(what, done, total)

    def _step_done(self, result: object) -> None:
        if result == CANCELLED:
            self._finish()
            self.cancelled.emit()
        elif self._step == "gather" and isinstance(result, ReportContent):
            self._paint(result)
        elif self._step == "paint" and isinstance(result, int):
            path = self._job.get("path") or "printer"
            self._finish()
            self.written.emit(path, result)

    def _paint(self, content: ReportContent) -> None:
        """Steps 2 and 3 (see the module docstring)."""
        self.progress.emit("Drawing the charts…", 0, 1)
        recorded = record_screen_charts(content)
        printer = self._job.get("printer")
        if printer is not None:
            try:
                pages = print_report(content, printer)
            except OSError as exc:
                self._failed(str(exc))
                return
            self._finish()
            self.written.emit("printer", pages)
            return
        self._step = "paint"
        path, page = str(self._job["path"]), self._job["page"]
        self.runner.start(lambda p: paint_step(content, path, page, recorded, p))

    def _failed(self, message: str) -> None:
        self._finish()
        self.failed.emit(message)

    def _finish(self) -> None:
        self._step = ""
        self._job = {}

    def shutdown(self) -> None:
        self.runner.shutdown()
