"""Import Framework Config… on a torchtitan registry file with several recipe functions
(issue 39): the window asks which one (the CLI's ``FILE::function``) and imports it;
cancelling imports nothing. The list dialog is monkeypatched."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from gui import dialogs

WILD = Path(__file__).resolve().parents[1] / "data" / "configs-wild"


@pytest.fixture
def registry(tmp_path: Path) -> Path:
    """torchtitan's llama3 ``config_registry.py`` (tests/data/configs-wild, with its source)."""
    path = tmp_path / "config_registry.py"
    shutil.copy(WILD / "torchtitan_llama3_config_registry.py.txt", path)
    return path


def _answer(monkeypatch: pytest.MonkeyPatch, pick: str, ok: bool) -> list[list[str]]:
    import gui.frameworks.framework_actions as fa

    offered: list[list[str]] = []

    def get_item(*args: Any) -> tuple[str, bool]:
        offered.append(list(args[3]))
        return pick, ok

    monkeypatch.setattr(fa.QInputDialog, "getItem", staticmethod(get_item))
    monkeypatch.setattr(dialogs, "show_info", lambda *_a: None)
    errors: list[str] = []
    monkeypatch.setattr(dialogs, "show_error", lambda _p, _t, text: errors.append(text))
    return offered


def test_the_window_asks_which_recipe_and_imports_it(
    window: Any, registry: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    offered = _answer(monkeypatch, "llama3_70b", True)
    assert window.framework.handler.import_path(str(registry))
    # the registry's recipes, in file order (torchtitan models/llama3/config_registry.py)
    assert len(offered) == 1 and "llama3_70b" in offered[0] and "llama3_8b" in offered[0]
    plan = window.doc.plan
    # llama3_70b: TP 8 and full AC (tests/data/configs-wild/expected.json, hand-checked)
    assert plan.model.name == "Llama-3.1-70B"
    assert plan.parallelism.tp == 8
    assert plan.method.recompute.policy == "full"
    assert window.doc.undo_stack.count() == 1


def test_cancelling_the_choice_imports_nothing(
    window: Any, registry: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = window.doc.plan
    _answer(monkeypatch, "", False)
    assert not window.framework.handler.import_path(str(registry))
    assert window.doc.plan == before
    assert window.doc.undo_stack.count() == 0


def test_a_file_with_one_recipe_is_not_asked_about(
    window: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    offered = _answer(monkeypatch, "never", True)
    path = tmp_path / "theirs.json"
    path.write_text('{"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2}}')
    assert window.framework.handler.import_path(str(path))
    assert offered == []
