"""Saving asks first, and says why, when the plan is not what it seems: a field shows a
refused value, or the engine cannot compute the plan (TP 3 with 32 heads)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from engine import planfile
from gui import dialogs
from tests.gui.test_field_commits import retype


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, Any]:
    state: dict[str, Any] = {"answer": False, "problems": None}

    def ask(_parent: Any, _name: str, problems: list[str]) -> bool:
        state["problems"] = problems
        return bool(state["answer"])

    monkeypatch.setattr(dialogs, "ask_save_anyway", ask)
    target = tmp_path / "plan.memplan"
    monkeypatch.setattr(dialogs, "save_path", lambda _p, _s: str(target))
    state["target"] = target
    return state


def test_an_uncomputable_plan_asks_and_says_why(qtbot: Any, window: Any, asked: Any) -> None:
    window.doc.set("parallelism.tp", 3, merge=False)
    window.doc.flush()
    assert not window.files.save_plan()  # the user cancelled
    assert not asked["target"].exists()
    (why,) = asked["problems"]
    assert "cannot compute this plan" in why and "parallelism.tp" in why and "heads" in why
    asked["answer"] = True
    assert window.files.save_plan()
    assert planfile.load(asked["target"]).plan.parallelism.tp == 3


def test_a_refused_value_in_a_field_is_named(qtbot: Any, window: Any, asked: Any) -> None:
    edit = retype(qtbot, window, "model.architecture.layers", "1e15")
    qtbot.keyClick(edit, Qt.Key.Key_Return)
    asked["answer"] = True
    assert window.files.save_plan()
    (why,) = asked["problems"]
    assert why.startswith("Layer count shows a value the plan refused")
    assert "the file keeps 32" in why
    assert planfile.load(asked["target"]).plan.model.architecture.layers == 32


def test_typed_text_is_committed_before_saving(qtbot: Any, window: Any, asked: Any) -> None:
    """A value typed and saved at once (Ctrl+S before leaving the field) is in the file,
    with no question asked."""
    retype(qtbot, window, "parallelism.dp", "4")
    assert window.doc.plan.parallelism.dp == 8  # not committed yet: no pause, no Enter
    assert window.files.save_plan()
    assert asked["problems"] is None
    assert planfile.load(asked["target"]).plan.parallelism.dp == 4
