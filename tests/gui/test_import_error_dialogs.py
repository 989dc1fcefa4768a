"""File → Import Framework Config… / Import Model Folder… show every refusal in a dialog
(issue 33: a RecursionError, a FIFO or a NaN used to make the action do nothing, or
block), and leave the plan as it was."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QMessageBox

from engine.exports.import_guard import IMPORT_MESSAGE_CHARS
from gui import dialogs
from gui.frameworks import framework_actions

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"


@pytest.fixture
def errors(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    shown: list[str] = []
    monkeypatch.setattr(dialogs, "show_error", lambda _p, _t, text: shown.append(text))
    monkeypatch.setattr(dialogs, "show_info", lambda _p, _t, _text: None)
    return shown


def _choose(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    dialog = framework_actions.QFileDialog
    monkeypatch.setattr(dialog, "getOpenFileName", lambda *_a, **_k: (str(path), ""))
    monkeypatch.setattr(dialog, "getExistingDirectory", lambda *_a, **_k: str(path))


def _bad_files(tmp_path: Path) -> list[tuple[Path, str]]:
    """(file, words its dialog must show): one per former silent failure."""
    deep_toml = tmp_path / "deep.toml"
    deep_toml.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")  # was RecursionError
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)  # was a window blocked forever
    nan = tmp_path / "config.json"
    llama = json.loads((CONFIGS / "llama-3.2-1b.json").read_text())
    nan.write_text(json.dumps(llama)[:-1] + ', "rope_theta": NaN}')  # was stored as null
    zero = tmp_path / "ds.json"
    zero.write_text('{"train_micro_batch_size_per_gpu": 1e999}')  # was OverflowError
    return [
        (deep_toml, "deep.toml: it nests more than 64 levels deep"),
        (fifo, "pipe.json is not a regular file"),
        (nan, "config.json: rope_theta: NaN is not a number JSON allows"),
        (zero, "ds.json: train_micro_batch_size_per_gpu: '1e999' is too large"),
    ]


def test_every_import_refusal_is_shown_in_a_dialog(
    window: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, errors: list[str]
) -> None:
    before = window.doc.plan
    for path, words in _bad_files(tmp_path):
        _choose(monkeypatch, path)
        window.framework.import_action.trigger()
        assert errors and words in errors[-1], (path.name, errors)
        assert len(errors[-1]) <= IMPORT_MESSAGE_CHARS and "Traceback" not in errors[-1]
        assert window.doc.plan is before  # nothing half-applied
    assert len(errors) == 4


def test_a_model_folder_refusal_is_shown_in_a_dialog(
    window: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, errors: list[str]
) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text((CONFIGS / "llama-3.2-1b.json").read_text())
    os.mkfifo(folder / "model.safetensors")
    _choose(monkeypatch, folder)
    window.framework.import_folder_action.trigger()
    assert errors == ["model: model.safetensors is not a regular file (a folder, device or pipe)"]


def test_the_model_tab_shows_refusals_and_guesses(
    window: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Model tab's own import: a refusal reaches its warning box in one sentence,
    and a guessed dtype (``torch_dtype: "auto"`` with no weights) is said, not silent."""
    warned: list[str] = []
    told: list[str] = []
    monkeypatch.setattr(QMessageBox, "warning", lambda *a: warned.append(a[2]))
    monkeypatch.setattr(QMessageBox, "information", lambda *a: told.append(a[2]))
    deep = tmp_path / "deep" / "config.json"
    deep.parent.mkdir()
    deep.write_text('{"model_type": "llama", "x": ' + "[" * 5000 + "]" * 5000 + "}")
    assert not window.tabs["model"].import_path(str(deep), folder=False)
    assert warned == ["config.json nests more than 60 levels deep; no config MemPlan reads does"]
    llama = json.loads((CONFIGS / "llama-3.2-1b.json").read_text())
    auto = tmp_path / "auto" / "config.json"
    auto.parent.mkdir()
    auto.write_text(json.dumps({**llama, "torch_dtype": "auto"}))
    assert window.tabs["model"].import_path(str(auto), folder=False)
    assert told == ["• torch_dtype 'auto' with no weights to read: assumed bfloat16"]
