"""Random edits through the window's own widgets, then undo all and redo all: every step
back must reproduce the config hash seen going forward, the start and the end exactly.

Edits go through the editors' signals as a user's would (typing a whole value, then
leaving the field; clicking a box; choosing a combo item), with plausible values from
the field's own type and hostile text (empty, huge, not a number, an emoji).
"""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

from PySide6.QtWidgets import QCheckBox, QComboBox, QLineEdit

from engine import planfile
from engine.plan import Plan
from tests.fuzz.memplan_cli import run_memplan
from tests.fuzz.plans import leaves, random_value
from tests.fuzz.tally import Tally

HOSTILE_TEXT = ("", " ", "-1", "0", "abc", "1e999", "9" * 400, "0x10", "1,5", "NaN", "∞", "😀")


def _edit(binding: Any, rng: random.Random, plan: Plan) -> None:
    editor = binding.editor
    if isinstance(editor, QCheckBox):
        editor.toggle()
    elif isinstance(editor, QComboBox):
        index = rng.randrange(editor.count())
        editor.setCurrentIndex(index)
        editor.activated.emit(index)
    elif isinstance(editor, QLineEdit):
        fields = {path: (ann, meta) for path, ann, meta in leaves(plan)}
        spec = fields.get(binding.spec.path)
        if spec is not None and rng.random() < 0.7:
            text = binding.format(random_value(rng, *spec))
        else:
            text = rng.choice(HOSTILE_TEXT)
        editor.setText(text)
        editor.textEdited.emit(text)
        editor.editingFinished.emit()


@contextmanager
def slot_exceptions(tally: Tally, case: list[str]) -> Iterator[None]:
    """Count what a Qt slot raises (PySide reports it to ``sys.excepthook``; the signal
    that ran the slot returns normally) as a crash of the current case."""

    def hook(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        tally.crash(case[0], exc)

    previous, sys.excepthook = sys.excepthook, hook
    try:
        yield
    finally:
        sys.excepthook = previous


def run_gui_edits(window: Any, count: int, seed: int) -> Tally:
    """``count`` random edits on ``window``, then the undo/redo walk."""
    tally = Tally("gui edits")
    current = [""]
    with slot_exceptions(tally, current):
        _edits(window, count, seed, tally, current)
    return tally


def _edits(window: Any, count: int, seed: int, tally: Tally, current: list[str]) -> None:
    rng = random.Random(seed)
    doc = window.doc
    bindings = [b for page in window.tabs.values() for b in page.bindings.values()]
    start, first = doc.plan.config_hash(), doc.undo_stack.index()
    for i in range(count):
        binding = rng.choice(bindings)
        case = current[0] = f"gui seed={seed} edit={i} {binding.spec.path}"
        with tally.case(case):
            try:
                _edit(binding, rng, doc.plan)
                doc.flush()
            except Exception as exc:
                tally.crash(case, exc)
                continue
            shown = doc.estimate.config_hash if doc.estimate else None
            if not doc.stale and shown != doc.plan.config_hash():
                tally.lose(case, "the estimate on screen is not the plan's")
            tally.outcomes["edit"] += 1
    end = doc.plan.config_hash()
    back = []
    while doc.undo_stack.index() > first:
        doc.undo_stack.undo()
        back.append(doc.plan.config_hash())
    if doc.plan.config_hash() != start:
        tally.lose(f"gui seed={seed}", "undoing every edit does not return to the start")
    forward = []
    while doc.undo_stack.canRedo():
        doc.undo_stack.redo()
        forward.append(doc.plan.config_hash())
    retraced = [end, *back][-2::-1]  # the states after undo step k, from the first on
    if doc.plan.config_hash() != end or forward != retraced:
        tally.lose(f"gui seed={seed}", "redoing every edit does not retrace the same plans")
    tally.outcomes["undo steps"] += len(back)
    doc.flush()


def report_case(plan: Plan, folder: Path, case: str, tally: Tally) -> None:
    """The PDF report of one plan through ``memplan report`` (the window's Export uses
    the same gather and writer)."""
    path, pdf = folder / "report.memplan", folder / "report.pdf"
    planfile.save(planfile.PlanFile(plan=plan, name=case), path)
    pdf.unlink(missing_ok=True)
    with tally.case(case):
        try:
            code, err = run_memplan(["report", str(path), "-o", str(pdf)])
        except Exception as exc:
            tally.crash(case, exc)
            return
    if code not in (0, 1) or "Traceback" in err or (code == 0 and pdf.stat().st_size == 0):
        tally.crash(case, RuntimeError(f"report exit {code}: {err[-400:]}"))
    tally.outcomes[f"report exit {code}"] += 1
