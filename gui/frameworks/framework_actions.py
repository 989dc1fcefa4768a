"""What File → Import Framework Config… / Import Model Folder… and Export Framework
Config do (the menu entries are :mod:`gui.frameworks.framework_menu`'s, which imports this module
on first use: ``engine.exports`` is tens of milliseconds of a start).

The window's face of ``engine.exports``: an export refuses a plan that does not validate
(the validator's words), writes the config and its companions (the ds_config an
accelerate YAML points at, the PEFT snippet of a LoRA plan) where the user says — after
a confirmation naming every one of them that already exists (the file dialog asks only
about the main file, so it is told not to), never over a FIFO or a device — and
shows what the file could not express, with a Check button that loads the file with the
framework's own classes on a worker thread (``engine.exports.check``; it runs a child
Python, never on the GUI thread). An import reads any of the five kinds
(``engine.exports.importers``) over the current plan and applies the difference as one
undo step, listing each ``auto`` it resolved and each key it did not understand.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QSize
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QInputDialog,
    QLabel,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from engine.exports import FORMATS, Export
from engine.exports.check import CheckResult, check_export
from engine.exports.common import changed_fields, existing, export_files
from engine.exports.importers import import_file
from engine.exports.titan_recipe import recipe_functions
from engine.fileio.atomic import write_atomic
from engine.legality.checks import plan_problems
from engine.plan import Plan
from gui import dialogs
from gui.document import PlanDocument
from gui.screen_fit import fitted, screen_of
from gui.workers.workers import TaskRunner

IMPORT_FILTER = (
    "Framework configs and model configs (*.json *.yaml *.yml *.toml *.py *.sh *.txt);;"
    "All files (*)"
)


def ask_overwrite(parent: QWidget, paths: list[Path]) -> bool:
    """Whether to replace the export's files that already exist (every one named)."""
    names = "\n".join(f"• {p}" for p in paths)
    answer = QMessageBox.warning(
        parent,
        "Replace existing files?",
        f"The export would replace {'this file' if len(paths) == 1 else 'these files'}:\n{names}",
        QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel,
        QMessageBox.StandardButton.Cancel,
    )
    return answer == QMessageBox.StandardButton.Yes


def export_summary(exp: Export, written: list[Path]) -> str:
    """What the export dialog says: the files, the target version, what is missing."""
    lines = [f"Wrote {', '.join(p.name for p in written)} for {exp.target}."]
    if exp.unexpressed:
        lines += ["", "Plan inputs this file cannot express:"]
        lines += [f"• {u}" for u in exp.unexpressed]
    else:
        lines += ["", "Every plan input is expressed."]
    if exp.advice:
        lines += ["", *(f"• {a}" for a in exp.advice)]
    return "\n".join(lines)


def check_summary(results: list[CheckResult]) -> str:
    words = {True: "accepted", False: "REFUSED"}
    return "\n".join(
        f"{r.format}: {words[r.ok] if r.available else 'not checked'} — {r.message}"
        for r in results
    )


RESULT_SIZE = QSize(680, 480)
"""The export dialog's size on a screen with room for it (the list of what the file
cannot express reads a line per input)."""


class ExportResult(QDialog):
    """The written export: what it cannot express, and a Check button (off-thread)."""

    def __init__(self, parent: QWidget, exp: Export, plan: Plan, written: list[Path]) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Exported {exp.filename}")
        self.exp, self.plan = exp, plan
        layout = QVBoxLayout(self)
        text = QPlainTextEdit(export_summary(exp, written))
        text.setReadOnly(True)
        layout.addWidget(text)
        self.check_label = QLabel("")
        self.check_label.setWordWrap(True)
        layout.addWidget(self.check_label)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.check_button = QPushButton("&Check with the framework")
        self.check_button.setToolTip("Load the file with the framework's own config classes")
        buttons.addButton(self.check_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.rejected.connect(self.close)
        self.check_button.clicked.connect(self.start_check)
        layout.addWidget(buttons)
        screen = screen_of(parent)  # lines of ~90 characters; Qt's least size cut them up
        self.resize(fitted(RESULT_SIZE, screen.availableGeometry()) if screen else RESULT_SIZE)
        self.runner = TaskRunner(self)
        self.runner.finished.connect(self._checked)
        self.runner.failed.connect(lambda msg: self.check_label.setText(f"Check failed: {msg}"))
        self.results: list[CheckResult] | None = None

    def start_check(self) -> None:
        self.check_button.setEnabled(False)
        self.check_label.setText("Checking…")
        exp, plan = self.exp, self.plan
        self.runner.start(lambda _progress: check_export(exp, plan))

    def _checked(self, results: object) -> None:
        assert isinstance(results, list)
        self.results = results
        self.check_label.setText(check_summary(results))
        self.check_button.setEnabled(True)


class FrameworkActions:
    """Exports and imports of one window's document, with their dialogs."""

    def __init__(self, window: QWidget, doc: PlanDocument) -> None:
        self.window, self.doc = window, doc
        self.result: ExportResult | None = None

    def _start_dir(self) -> str:
        return str(self.doc.path.parent if self.doc.path else Path.home())

    def export_dialog(self, key: str) -> bool:
        filename = FORMATS[key].write(self.doc.plan).filename
        path, _ = QFileDialog.getSaveFileName(
            self.window,
            "Export framework config",
            str(Path(self._start_dir()) / filename),
            options=QFileDialog.Option.DontConfirmOverwrite,  # export_to asks, naming all
        )
        return bool(path) and self.export_to(key, path)

    def export_to(self, key: str, path: str) -> bool:
        """Write the ``key`` export (and companions beside it); show what it lacks."""
        plan = self.doc.plan
        problems = plan_problems(plan)
        if problems:
            msg = "\n".join(f"• {p.message}" for p in problems)
            dialogs.show_error(self.window, "Cannot export: the plan does not validate", msg)
            return False
        exp = FORMATS[key].export(plan)
        files = export_files(exp, path)
        there = existing([p for p, _ in files])
        if there and not ask_overwrite(self.window, there):
            return False
        try:
            for p, text in files:
                write_atomic(text.encode("utf-8"), p)
        except OSError as exc:
            dialogs.show_error(self.window, "Cannot export", f"{path}: {exc.strerror or exc}")
            return False
        self.result = ExportResult(self.window, exp, plan, [p for p, _ in files])
        self.result.show()
        return True

    def import_dialog(self) -> bool:
        path, _ = QFileDialog.getOpenFileName(
            self.window, "Import framework config", self._start_dir(), IMPORT_FILTER
        )
        return bool(path) and self.import_path(path)

    def import_folder_dialog(self) -> bool:
        path = QFileDialog.getExistingDirectory(
            self.window, "Import model folder", self._start_dir()
        )
        return bool(path) and self.import_path(path)

    def choose_recipe(self, p: Path) -> str | None:
        """For a torchtitan registry file holding several recipe functions, the one the
        user picks (the CLI's ``FILE::function``); "" when there is nothing to choose,
        None when the user cancels."""
        if p.suffix.lower() not in (".py", ".txt") or not p.is_file():
            return ""
        try:
            names = recipe_functions(p.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            return ""  # the importer says what is wrong with the file
        if len(names) < 2:
            return ""
        name, ok = QInputDialog.getItem(
            self.window,
            f"Import {p.name}",
            f"{p.name} holds {len(names)} recipe functions; import which one?",
            names,
            0,
            False,
        )
        return name if ok and name else None

    def import_path(self, path: str) -> bool:
        """Apply a framework config or model to the plan as one undo step."""
        p = Path(path)
        function = self.choose_recipe(p)
        if function is None:
            return False
        target = p.with_name(f"{p.name}::{function}") if function else p
        try:  # every refusal is one sentence naming the file (ImportRefused)
            got = import_file(target, self.doc.plan)
        except ValueError as exc:
            dialogs.show_error(self.window, "Cannot import", str(exc))
            return False
        changes = changed_fields(self.doc.plan, got.plan)
        if changes and not self.doc.set_many(changes, f"Import {p.name}"):
            why = "; ".join(self.doc.invalid.values()) or "the plan refuses these values"
            dialogs.show_error(self.window, "Cannot import", f"{p.name}: {why}")
            return False
        lines = [f"Resolved: {r}" for r in got.resolutions]
        lines += [f"Not modelled: {w}" for w in got.warnings]
        lines += [f"Does not validate: {q.message}" for q in plan_problems(self.doc.plan)]
        if not changes:
            lines.insert(0, "The file states nothing that differs from the plan.")
        if lines:
            dialogs.show_info(self.window, f"Imported {p.name}", "\n".join(f"• {x}" for x in lines))
        return True
