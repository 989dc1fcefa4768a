"""PlanDocument: the one owner of the plan in the GUI.

Tabs never touch each other or the views: they call :meth:`PlanDocument.set`, which
validates the change through the engine, pushes an undoable command that swaps the
immutable Plan, and schedules one recompute. Several edits in one event-loop turn
(a preset that sets ten fields, fast typing) cost one estimate, because the recompute
runs from a 0 ms single-shot timer. An invalid value never replaces the plan; a plan
the engine cannot lay out keeps the last valid estimate on screen, marked stale.

The estimate runs here, on the GUI thread, for every model, a large model's first one
(its tensor inventory built) included: that is quick enough that a worker thread would
add a stale state and a hand-off without taking a stall away (``tests/bench_gui.py``
prints the largest presets' event-loop gap and busiest GUI turn while applying them).
:meth:`PlanDocument.flush` computes at once: what a save, a report or a test needs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtGui import QUndoCommand, QUndoStack

from engine import planfile
from engine.errors import PlanError, Problem
from engine.estimate import Estimate, estimate
from engine.plan import Plan, default_plan, get_value, validation_problems, with_values
from gui.companions import with_companions
from gui.fields.undo_text import edit_text
from gui.files.file_identity import UNTITLED, name_after_file, write
from gui.workers import gc_policy

MERGE_ID = 0x6D70  # QUndoCommand.id() shared by mergeable field edits


def messages_by_field(problems: tuple[Problem, ...] | list[Problem]) -> dict[str, str]:
    """Each field path the problems concern, with their messages ("; "-joined): what a
    view marks at that field."""
    out: dict[str, list[str]] = {}
    for problem in problems:
        for path in problem.fields:
            out.setdefault(path, []).append(problem.message)
    return {path: "; ".join(messages) for path, messages in out.items()}


class _PlanCommand(QUndoCommand):
    """Replace the plan by another; typing in one field merges into one step."""

    def __init__(
        self, doc: PlanDocument, before: Plan, after: Plan, text: str, merge_key: str | None
    ) -> None:
        super().__init__(text)
        self._doc, self.before, self.after, self.merge_key = doc, before, after, merge_key

    def id(self) -> int:
        return MERGE_ID if self.merge_key is not None else -1

    def mergeWith(self, other: QUndoCommand) -> bool:
        if not isinstance(other, _PlanCommand) or other.merge_key != self.merge_key:
            return False
        self.after = other.after
        if self.after == self.before:
            self.setObsolete(True)
        return True

    def redo(self) -> None:
        self._doc._replace_plan(self.after)

    def undo(self) -> None:
        self._doc._replace_plan(self.before)


class _SwapCommand(QUndoCommand):
    """Swap a value kept with the plan — its measured records, its name and notes — so
    attaching a run or renaming the plan is undoable too."""

    def __init__(self, text: str, before: Any, after: Any, apply: Callable[[Any], None]) -> None:
        super().__init__(text)
        self.before, self.after, self._apply = before, after, apply

    def redo(self) -> None:
        self._apply(self.after)

    def undo(self) -> None:
        self._apply(self.before)


class PlanDocument(QObject):
    """A plan with its file, undo history and latest valid estimate."""

    planChanged = Signal()
    estimateChanged = Signal()
    estimateFailed = Signal(str)  # the plan is valid but cannot be computed
    fieldError = Signal(str, str)  # path, the engine's message for that field
    fieldOk = Signal(str)
    pathChanged = Signal()
    dirtyChanged = Signal(bool)
    measurementsChanged = Signal()
    propertiesChanged = Signal()  # the plan's name or notes
    invalidChanged = Signal()  # the set of fields showing an invalid value
    abandonEdits = Signal()  # undo/redo came first: drop typed, uncommitted text
    commitTyping = Signal()  # a save or a report is next: commit typed text now

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.undo_stack = QUndoStack(self)
        self.undo_stack.cleanChanged.connect(self._clean_changed)
        self._plan: Plan = default_plan()
        self.path: Path | None = None
        self.name = UNTITLED
        self.notes = ""
        self.created = self.modified = ""  # the file's times ("" until it is written)
        self.measurements: tuple[dict[str, Any], ...] = ()
        self.messages: tuple[str, ...] = ()  # from opening the file (e.g. upgraded)
        self.estimate: Estimate | None = None
        self.estimate_error: str | None = None
        self.estimate_problems: tuple[Problem, ...] = ()  # why estimate_error, by field
        self._invalid_fields: set[str] = set()  # marked by the last refused edit
        self.invalid: dict[str, str] = {}  # every field showing an invalid value: message
        self.typing: set[str] = set()  # fields holding typed text not yet committed
        self._merge_session = 0
        self._estimated_arch: object = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(0)
        self._timer.timeout.connect(self._recompute)
        self._recompute()

    def _clean_changed(self, clean: bool) -> None:
        self.dirtyChanged.emit(not clean)

    # reading -------------------------------------------------------------------
    @property
    def plan(self) -> Plan:
        return self._plan

    @property
    def dirty(self) -> bool:
        return not self.undo_stack.isClean()

    def value(self, path: str) -> Any:
        return get_value(self._plan, path)

    def display_name(self) -> str:
        return self.path.name if self.path else self.name

    def title(self) -> str:
        """The plan as the window title names it: its name, and its file when the file
        is called something else ("Llama 8B baseline — base.memplan")."""
        if self.path is None or self.path.stem == self.name:
            return self.display_name()
        return f"{self.name} — {self.path.name}"

    # editing -------------------------------------------------------------------
    def end_merge(self) -> None:
        """Close the current typing run so the next edit starts a new undo step."""
        self._merge_session += 1

    def set(self, path: str, value: Any, merge: bool = True, text: str | None = None) -> bool:
        """Set one field; False (and ``fieldError``) when the engine rejects the value.
        The undo text is in words ("Set data-parallel size to 16") unless given."""
        key = f"{path}#{self._merge_session}" if merge else None
        changes = with_companions(self._plan, {path: value})  # Kind custom: a subset to start
        return self._push(changes, text or edit_text(path, value), key, focus=path)

    def set_many(self, changes: dict[str, Any], text: str) -> bool:
        """Set several fields as one undo step (a preset, an import)."""
        return self._push(changes, text, None, focus=next(iter(changes), ""))

    def _push(self, changes: dict[str, Any], text: str, key: str | None, focus: str) -> bool:
        try:
            new = with_values(self._plan, changes)
        except ValidationError as exc:
            self._refuse(focus, validation_problems(exc))
            return False
        except KeyError as exc:
            self._refuse(focus, [Problem((), str(exc.args[0]) if exc.args else str(exc))])
            return False
        for path in {*changes, *self._invalid_fields}:
            self.fieldOk.emit(path)
        self._invalid_fields.clear()
        if new == self._plan:
            return True
        self.undo_stack.push(_PlanCommand(self, self._plan, new, text, key))
        return True

    def _refuse(self, focus: str, problems: list[Problem]) -> None:
        """Mark every field the problems name, and the edited field with all of them."""
        marks = messages_by_field(problems)
        marks[focus] = "; ".join(p.message for p in problems)
        for path, message in marks.items():
            self.fieldError.emit(path, message)
        self._invalid_fields |= marks.keys()

    def note_invalid(self, path: str, message: str | None) -> None:
        """A field shows (or no longer shows) an invalid value: what the banner counts."""
        had = self.invalid.get(path)
        if message:
            self.invalid[path] = message
        else:
            self.invalid.pop(path, None)
        if had != self.invalid.get(path):
            self.invalidChanged.emit()

    def note_typing(self, path: str, typing: bool) -> None:
        """A field holds typed text it has not committed yet (or no longer does)."""
        if typing:
            self.typing.add(path)
        else:
            self.typing.discard(path)

    def commit_typing(self) -> None:
        """Commit the text typed in any field now (what a save or a report must see),
        then recompute: a value typed and saved with Ctrl+S at once is in the file."""
        if self.typing:
            self.commitTyping.emit()
        self.flush()

    def undo(self) -> None:
        """Edit → Undo, whatever has the focus: the document's history, never a line
        edit's own. Typed text not yet committed is dropped first (one step: the field
        goes back to the plan's value), so an undo never pushes an edit or clears Redo."""
        self.end_merge()
        if self.typing:
            self.abandonEdits.emit()
            self.typing.clear()
            return
        self.undo_stack.undo()

    def redo(self) -> None:
        self.end_merge()
        if self.typing:
            self.abandonEdits.emit()
            self.typing.clear()
        self.undo_stack.redo()

    def set_properties(self, name: str, notes: str) -> None:
        """Rename the plan or change its notes, as one undo step."""
        name = name.strip() or self.name
        if (name, notes) != (self.name, self.notes):
            text = "Edit plan name and notes" if name == self.name else "Rename plan"
            before = (self.name, self.notes)
            self.undo_stack.push(
                _SwapCommand(text, before, (name, notes), lambda v: self._replace_properties(*v))
            )

    def _replace_properties(self, name: str, notes: str) -> None:
        self.name, self.notes = name, notes
        self.propertiesChanged.emit()

    def set_measurements(self, records: tuple[dict[str, Any], ...], text: str) -> None:
        """Replace the attached measured records as one undo step."""
        if records != self.measurements:
            self.undo_stack.push(
                _SwapCommand(text, self.measurements, records, self._replace_measurements)
            )

    def _replace_measurements(self, records: tuple[dict[str, Any], ...]) -> None:
        self.measurements = records
        self.measurementsChanged.emit()

    def _replace_plan(self, plan: Plan) -> None:
        self._plan = plan
        self.planChanged.emit()
        self._timer.start()

    # computing -----------------------------------------------------------------
    def flush(self) -> None:
        """Recompute now (a save, a report, a comparison must see the plan's own
        figures, not wait for the turn's timer)."""
        self._timer.stop()
        self._recompute()

    @property
    def pending(self) -> bool:
        return self._timer.isActive()

    def _recompute(self) -> None:
        """Estimate the plan: show it, or say why it has none."""
        try:
            result = estimate(self._plan)
        except PlanError as exc:
            self.estimate_error, self.estimate_problems = str(exc), exc.problems
            self.estimateFailed.emit(self.estimate_error)
            return
        self.estimate, self.estimate_error, self.estimate_problems = result, None, ()
        arch = self._plan.model.architecture
        if arch != self._estimated_arch:  # a new model's tensor inventory is now cached
            self._estimated_arch = arch
            gc_policy.settle()
        self.estimateChanged.emit()

    @property
    def stale(self) -> bool:
        """The estimate on screen is an earlier plan's (the current one is uncomputable)."""
        return self.estimate_error is not None

    # files ---------------------------------------------------------------------
    def _adopt(self, pf: planfile.PlanFile, path: Path | None) -> None:
        self.undo_stack.clear()
        self.path = path
        self.name, self.notes, self.created = pf.name, pf.notes, pf.created
        self.modified = pf.modified
        self.measurements, self.messages = pf.measurements, pf.extra_messages
        self.typing.clear()
        self.abandonEdits.emit()
        self.measurementsChanged.emit()
        self.propertiesChanged.emit()
        self._plan = pf.plan
        self.planChanged.emit()
        self._timer.stop()
        self._recompute()
        self.pathChanged.emit()
        self.dirtyChanged.emit(False)

    def new(self) -> None:
        """Start over on the built-in default plan."""
        self._adopt(planfile.PlanFile(plan=default_plan()), None)

    def open(self, path: str | Path) -> None:
        """Open a file; raises PlanFileError and changes nothing when it cannot."""
        pf = planfile.load(path)
        self._adopt(pf, Path(path))

    def recover(self, autosave: str | Path, original: str | None) -> None:
        """Load an autosave as unsaved changes to ``original`` (or to a new plan)."""
        pf = planfile.load(autosave)
        self._adopt(pf, Path(original) if original else None)
        self.undo_stack.resetClean()  # recovered edits are not on disk yet
        self.dirtyChanged.emit(True)

    def revert(self) -> None:
        if self.path is not None:
            self.open(self.path)

    def to_planfile(self) -> planfile.PlanFile:
        return planfile.PlanFile(
            plan=self._plan,
            name=self.name,
            notes=self.notes,
            created=self.created,
            modified=self.modified,
            measurements=self.measurements,
        )

    def save(self, path: str | Path | None = None) -> Path:
        """Write atomically to ``path`` (or the current file) and mark clean."""
        target = Path(path) if path is not None else self.path
        if target is None:
            raise ValueError("no file name: use Save As")
        self.name = name_after_file(self.name, target) if path is not None else self.name
        self.created, self.modified = write(self.to_planfile(), target)
        self.propertiesChanged.emit()
        self.path, self.messages = target, ()
        self.end_merge()  # typing on after a save is a new step: undo comes back to the file
        self.undo_stack.setClean()
        self.pathChanged.emit()
        return target
