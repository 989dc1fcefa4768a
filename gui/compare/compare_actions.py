"""File → Compare with Saved Version and Compare with File… for the main window.

The two ways an analyst asks "what did I change, and what did it cost?": the saved file
against the edits on screen (the saved version is the baseline, so the deltas are the
edits' effect), or the plan on screen against other plan files. One Compare window is
open at a time; asking again replaces its plans.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QFileDialog, QMainWindow

from engine.plan import Plan
from engine.planfile import PlanFileError, load
from engine.whatif.compare import Comparison
from gui import dialogs
from gui.compare.compare_window import CompareWindow
from gui.document import PlanDocument


class CompareActions:
    """The compare actions of one window and its document."""

    def __init__(self, window: QMainWindow, doc: PlanDocument) -> None:
        self.window, self.doc = window, doc
        self.compare_window: CompareWindow | None = None
        self.with_saved = QAction("Compare with &Saved Version", window)
        self.with_saved.setStatusTip("The file on disk against the edits on screen")
        self.with_saved.triggered.connect(lambda _c=False: self.compare_with_saved())
        self.with_file = QAction("Compare with &File…", window)
        self.with_file.setStatusTip("The plan on screen against other .memplan files")
        self.with_file.triggered.connect(lambda _c=False: self.ask_files())
        doc.pathChanged.connect(self._enable)
        self._enable()

    def _enable(self) -> None:
        self.with_saved.setEnabled(self.doc.path is not None)

    def _units(self) -> str:
        return str(getattr(self.window, "units", "both"))

    def _current(self) -> tuple[str, Plan]:
        self.doc.flush()
        return f"{self.doc.display_name()} (on screen)", self.doc.plan

    def open(self, plans: list[tuple[str, Plan]]) -> CompareWindow:
        """Show ``plans`` compared (the first the baseline) in the Compare window."""
        if self.compare_window is not None:
            self.compare_window.close()
            self.compare_window.deleteLater()
        self.compare_window = CompareWindow(plans, self._units(), self.window)
        self.compare_window.show()
        return self.compare_window

    def compare_with_saved(self) -> CompareWindow | None:
        path = self.doc.path
        if path is None:
            return None
        try:
            saved = load(path)
        except PlanFileError as exc:
            dialogs.show_error(self.window, "Cannot read the saved version", f"{path}: {exc}")
            return None
        return self.open([(f"{path.name} (saved)", saved.plan), self._current()])

    def compare_with_files(self, paths: list[str]) -> CompareWindow | None:
        plans = [self._current()]
        for p in paths:
            try:
                plans.append((Path(p).name, load(p).plan))
            except PlanFileError as exc:
                dialogs.show_error(self.window, "Cannot compare with this file", f"{p}: {exc}")
        return self.open(plans) if len(plans) > 1 else None

    def ask_files(self) -> CompareWindow | None:
        start = str(self.doc.path.parent) if self.doc.path else ""
        paths, _ = QFileDialog.getOpenFileNames(
            self.window, "Compare with plans", start, "MemPlan plans (*.memplan)"
        )
        return self.compare_with_files(paths) if paths else None

    def set_units(self, units: str) -> None:
        if self.compare_window is not None:
            self.compare_window.set_units(units)

    def for_report(self, config_hash: str) -> Comparison | None:
        w = self.compare_window
        return None if w is None else w.for_report(config_hash)

    def shutdown(self) -> None:
        if self.compare_window is not None:
            self.compare_window.runner.shutdown()
