"""File → Export Report… and File → Print… for the main window.

Both report the document as it is on screen: the current plan (saved or not), its
name and notes, and the window's units. Writing takes seconds, so it runs as a
background job (:mod:`gui.report.export_job`) shown in the status bar with its progress
and Cancel; the window stays usable meanwhile, and errors go to a dialog. The suggested
file name is made from the plan's name.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from PySide6.QtCore import QLocale, QObject
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QFileDialog, QMainWindow

from gui import dialogs
from gui.document import PlanDocument
from gui.workers.job_status import JobStatus

if TYPE_CHECKING:
    from gui.report.export_job import ReportExport
    from gui.report.pdf import PageName

EXPORT_SHORTCUT = "Ctrl+E"


def default_page() -> Literal["a4", "letter"]:
    """US Letter where the locale measures in US units, A4 elsewhere."""
    us = QLocale().measurementSystem() == QLocale.MeasurementSystem.ImperialUSSystem
    return "letter" if us else "a4"


def report_file_name(name: str) -> str:
    """A file name from the plan name: letters, digits, dot, dash and underscore."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "memplan-report"
    return f"{stem}-report.pdf"


class ReportActions(QObject):
    """The two File-menu actions, bound to one window and its document."""

    def __init__(self, window: QMainWindow, doc: PlanDocument) -> None:
        super().__init__(window)
        self.window, self.doc = window, doc
        self.export = QAction("Export &Report…", window)
        self.export.setShortcut(QKeySequence(EXPORT_SHORTCUT))
        self.export.setStatusTip("Write the PDF procurement report of this plan")
        self.export.triggered.connect(lambda _c=False: self.export_dialog())
        self.print = QAction("&Print…", window)
        self.print.setShortcut(QKeySequence(QKeySequence.StandardKey.Print))
        self.print.triggered.connect(lambda _c=False: self.print_dialog())
        self._job: ReportExport | None = None  # made (and its modules loaded) on first use
        self.status = JobStatus(window)
        window.statusBar().addWidget(self.status)
        self.last_written: tuple[str, int] | None = None  # path, pages of the last export

    @property
    def job(self) -> ReportExport:
        """The export job; the report's modules (layout, charts, sections) are imported
        here, at the first export, not when the window starts."""
        if self._job is None:
            from gui.report.export_job import ReportExport

            self._job = ReportExport(self)
            self._job.progress.connect(self.status.step)
            self._job.written.connect(self._written)
            self._job.failed.connect(self._failed)
            self._job.cancelled.connect(self._cancelled)
        return self._job

    @property
    def busy(self) -> bool:
        return self._job is not None and self._job.busy

    def _units(self) -> str:
        return str(getattr(self.window, "units", "both"))

    def _inputs(self) -> tuple[Any, dict[str, Any]] | None:
        """The plan file and the extras to report, or None (said in a dialog)."""
        self.doc.commit_typing()
        if self.doc.estimate is None or self.doc.estimate_error:
            dialogs.show_error(
                self.window,
                "Cannot write the report",
                f"This plan cannot be computed: {self.doc.estimate_error or 'no estimate'}",
            )
            return None
        bench = getattr(self.window, "workbench", None)  # a sweep or comparison asked for
        extras = bench.report_extras() if bench is not None else {}
        return self.doc.to_planfile(), extras

    def export_dialog(self) -> bool:
        start = self.doc.path.parent if self.doc.path else Path.home()
        suggestion = str(start / report_file_name(self.doc.name))
        path, _ = QFileDialog.getSaveFileName(
            self.window, "Export report", suggestion, "PDF documents (*.pdf)"
        )
        if not path:
            return False
        if not path.lower().endswith(".pdf"):
            path += ".pdf"
        return self.export_to(path)

    def export_to(self, path: str, page: PageName | None = None) -> bool:
        """Start writing the report to ``path``; False when it cannot start (said in a
        dialog). The job says when it is written (:attr:`last_written`, the status bar)."""
        if not Path(path).parent.is_dir():
            dialogs.show_error(
                self.window, "Cannot write the report", f"{path}: the folder does not exist"
            )
            return False
        got = self._inputs()
        if got is None:
            return False
        pf, extras = got
        self.last_written = None
        self.status.begin("Writing the report…", self.job.cancel)
        self.job.start(pf, self._units(), extras, path, page or default_page())
        return True

    def print_dialog(self) -> bool:
        from PySide6.QtPrintSupport import QPrintDialog, QPrinter

        printer = QPrinter(QPrinter.PrinterMode.HighResolution)
        dialog = QPrintDialog(printer, self.window)
        dialog.setWindowTitle("Print report")
        if dialog.exec() != QPrintDialog.DialogCode.Accepted:
            return False
        got = self._inputs()
        if got is None:
            return False
        pf, extras = got
        self._printer = printer  # kept alive until the job paints it
        self.status.begin("Preparing the report for the printer…", self.job.cancel)
        self.job.start(pf, self._units(), extras, None, default_page(), printer=printer)
        return True

    def _written(self, path: str, pages: int) -> None:
        self.status.end()
        self.last_written = (path, pages)
        where = "sent to the printer" if path == "printer" else f"written to {path}"
        self.window.statusBar().showMessage(f"Report {where} ({pages} pages)", 10_000)

    def _failed(self, message: str) -> None:
        self.status.end()
        dialogs.show_error(self.window, "Cannot write the report", message)

    def _cancelled(self) -> None:
        self.status.end()
        self.window.statusBar().showMessage("Report cancelled: nothing was written", 5_000)

    def shutdown(self) -> None:
        if self._job is not None:
            self._job.cancel()
            self._job.shutdown()
