"""File → Export Report… and File → Print… for the main window.

Both report the document as it is on screen: the current plan (saved or not), its
name and notes, and the window's units. Writing takes about a second, so the cursor
shows busy and the status bar says what is happening; errors go to a dialog.
"""

from __future__ import annotations

import re
from pathlib import Path

from PySide6.QtCore import QLocale, QObject, Qt
from PySide6.QtGui import QAction, QGuiApplication, QKeySequence
from PySide6.QtWidgets import QApplication, QFileDialog, QMainWindow

from engine.errors import PlanError
from gui import dialogs
from gui.document import PlanDocument
from gui.report.content import ReportContent, gather
from gui.report.pdf import PageName, print_report, write_pdf

EXPORT_SHORTCUT = "Ctrl+E"


def default_page() -> PageName:
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

    def _units(self) -> str:
        return str(getattr(self.window, "units", "both"))

    def _content(self) -> ReportContent | None:
        self.doc.flush()
        if self.doc.estimate is None:
            dialogs.show_error(
                self.window,
                "Cannot write the report",
                f"This plan cannot be computed: {self.doc.estimate_error or 'no estimate'}",
            )
            return None
        bench = getattr(self.window, "workbench", None)  # a sweep or comparison asked for
        extras = bench.report_extras() if bench is not None else {}
        try:
            return gather(self.doc.to_planfile(), self._units(), **extras)  # type: ignore[arg-type]
        except PlanError as exc:
            dialogs.show_error(self.window, "Cannot write the report", str(exc))
            return None

    def _status(self, text: str, ms: int = 0) -> None:
        self.window.statusBar().showMessage(text, ms)
        QApplication.processEvents()

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
        """Write the report to ``path``; True when written (errors shown in a dialog)."""
        QGuiApplication.setOverrideCursor(Qt.CursorShape.WaitCursor)
        try:
            self._status("Writing the report…")
            content = self._content()
            if content is None:
                return False
            pages = write_pdf(content, path, page or default_page())
        except OSError as exc:
            dialogs.show_error(self.window, "Cannot write the report", f"{path}: {exc}")
            self._status("")
            return False
        finally:
            QGuiApplication.restoreOverrideCursor()
        self._status(f"Report written to {path} ({pages} pages)", 10_000)
        return True

    def print_dialog(self) -> bool:
        from PySide6.QtPrintSupport import QPrintDialog, QPrinter

        printer = QPrinter(QPrinter.PrinterMode.HighResolution)
        dialog = QPrintDialog(printer, self.window)
        dialog.setWindowTitle("Print report")
        if dialog.exec() != QPrintDialog.DialogCode.Accepted:
            return False
        QGuiApplication.setOverrideCursor(Qt.CursorShape.WaitCursor)
        try:
            self._status("Printing the report…")
            content = self._content()
            if content is None:
                return False
            pages = print_report(content, printer)
        except OSError as exc:
            dialogs.show_error(self.window, "Cannot print the report", str(exc))
            return False
        finally:
            QGuiApplication.restoreOverrideCursor()
        self._status(f"Report sent to the printer ({pages} pages)", 10_000)
        return True
