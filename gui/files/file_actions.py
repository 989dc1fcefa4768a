"""File commands: New, Open, Open Recent, Save, Save As, Revert, and the unsaved prompt.

A file that cannot be opened shows the engine's message and changes nothing: the
document is only replaced after the whole file has parsed and validated.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMenu, QWidget

from engine.planfile import PlanFileError
from gui import dialogs
from gui.document import PlanDocument
from gui.files.save_check import save_problems
from gui.settings import Settings


class FileActions(QObject):
    """The File menu's actions, bound to one document and window."""

    def __init__(self, window: QWidget, doc: PlanDocument, settings: Settings) -> None:
        super().__init__(window)
        self.window, self.doc, self.settings = window, doc, settings
        self.new = self._action("&New", QKeySequence.StandardKey.New, self.new_plan)
        self.open = self._action("&Open…", QKeySequence.StandardKey.Open, self.open_dialog)
        self.save = self._action("&Save", QKeySequence.StandardKey.Save, self.save_plan)
        self.save_as = self._action("Save &As…", QKeySequence.StandardKey.SaveAs, self.save_plan_as)
        self.revert = self._action("&Revert to Saved", None, self.revert_plan)
        self.recent_menu = QMenu("Open &Recent", window)
        self.recent_menu.aboutToShow.connect(self.rebuild_recent)
        doc.pathChanged.connect(self._update_enabled)
        doc.dirtyChanged.connect(lambda _d: self._update_enabled())
        self._update_enabled()

    def _action(self, text: str, key: QKeySequence.StandardKey | None, slot: object) -> QAction:
        action = QAction(text, self.window)
        if key is not None:
            action.setShortcut(QKeySequence(key))
        action.triggered.connect(lambda _checked=False: slot())  # type: ignore[operator]
        return action

    def _update_enabled(self) -> None:
        self.revert.setEnabled(self.doc.path is not None and self.doc.dirty)

    # prompts --------------------------------------------------------------------
    def maybe_save(self) -> bool:
        """True when it is fine to drop the current document (saved or discarded)."""
        if not self.doc.dirty:
            return True
        answer = dialogs.ask_unsaved(self.window, self.doc.display_name())
        if answer == "save":
            return self.save_plan()
        return answer == "discard"

    # commands -------------------------------------------------------------------
    def new_plan(self) -> bool:
        if not self.maybe_save():
            return False
        self.doc.new()
        return True

    def open_dialog(self) -> bool:
        if not self.maybe_save():
            return False
        start = str(self.doc.path.parent) if self.doc.path else str(Path.home())
        path = dialogs.open_path(self.window, start)
        return bool(path) and self.open_file(path, ask=False)

    def open_file(self, path: str, ask: bool = True) -> bool:
        """Open ``path``; on a bad file show the error and keep the current plan."""
        if ask and not self.maybe_save():
            return False
        try:
            self.doc.open(path)
        except PlanFileError as exc:
            details = "\n".join(f"• {p}" for p in exc.problems[:8])
            dialogs.show_error(
                self.window, "Cannot open plan", f"{Path(path).name} was not opened:\n\n{details}"
            )
            return False
        self.settings.add_recent(path)
        if self.doc.messages:
            dialogs.show_info(self.window, "Plan opened", "\n\n".join(self.doc.messages))
        return True

    def save_plan(self) -> bool:
        if self.doc.path is None:
            return self.save_plan_as()
        return self._write(str(self.doc.path))

    def save_plan_as(self) -> bool:
        suggestion = str(self.doc.path or Path.home() / f"{self.doc.name}.memplan")
        path = dialogs.save_path(self.window, suggestion)
        return bool(path) and self._write(path)

    def _write(self, path: str) -> bool:
        self.doc.commit_typing()
        problems = save_problems(self.doc)
        if problems and not dialogs.ask_save_anyway(self.window, Path(path).name, problems):
            return False
        try:
            self.doc.save(path)
        except OSError as exc:
            dialogs.show_error(
                self.window, "Cannot save plan", f"{path} was not written: {exc.strerror or exc}"
            )
            return False
        self.settings.add_recent(path)
        return True

    def revert_plan(self) -> None:
        if self.doc.path is not None:
            self.open_file(str(self.doc.path), ask=False)

    def rebuild_recent(self) -> None:
        self.recent_menu.clear()
        recent = self.settings.recent_files()
        for path in recent:
            action = self.recent_menu.addAction(path)
            action.triggered.connect(lambda _c=False, p=path: self.open_file(p))
        if not recent:
            self.recent_menu.addAction("(none)").setEnabled(False)
        self.recent_menu.addSeparator()
        self.recent_menu.addAction("Clear list", self.settings.clear_recent)
