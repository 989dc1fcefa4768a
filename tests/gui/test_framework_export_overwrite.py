"""File → Export Framework Config over existing files (issue 33): one confirmation that
names every file the export would replace — the main one and its companions (the file
dialog asked only about the main one) — and nothing is written when it is declined; a
FIFO is never replaced, even when confirmed."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

import gui.frameworks.framework_actions as fa
from gui import dialogs


def test_export_asks_naming_every_existing_file(
    window: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[list[Path]] = []
    answer = {"yes": False}
    monkeypatch.setattr(fa, "ask_overwrite", lambda _w, paths: asked.append(paths) or answer["yes"])
    window.doc.set_many({"method.kind": "lora"}, "lora")
    main, snippet = tmp_path / "train.sh", tmp_path / "peft_config.py"
    for p in (main, snippet):
        p.write_text("mine\n", encoding="utf-8")
    assert not window.framework.handler.export_to("megatron", str(main))
    assert asked == [[main, snippet]]
    assert main.read_text(encoding="utf-8") == snippet.read_text(encoding="utf-8") == "mine\n"
    answer["yes"] = True
    assert window.framework.handler.export_to("megatron", str(main))
    assert main.read_text(encoding="utf-8").startswith("#!/bin/bash\n")
    assert "LoraConfig(" in snippet.read_text(encoding="utf-8")
    window.framework.handler.result.close()


def test_export_never_replaces_a_fifo(
    window: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not hasattr(os, "mkfifo"):  # pragma: no cover - POSIX only
        pytest.skip("no FIFOs here")
    errors: list[str] = []
    monkeypatch.setattr(fa, "ask_overwrite", lambda _w, _paths: True)
    monkeypatch.setattr(dialogs, "show_error", lambda _p, _t, text: errors.append(text))
    fifo = tmp_path / "ds.json"
    os.mkfifo(fifo)
    assert not window.framework.handler.export_to("deepspeed", str(fifo))
    assert "is a FIFO (named pipe); MemPlan saves only over regular files" in errors[0]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_the_file_dialog_leaves_the_question_to_the_export(
    window: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The save dialog is told not to ask (it would name the main file only); the
    export's own confirmation then names the existing file."""
    seen: dict[str, Any] = {}

    def dialog(*_a: Any, **kw: Any) -> tuple[str, str]:
        seen.update(kw)
        return str(tmp_path / "ds.json"), ""

    monkeypatch.setattr(fa.QFileDialog, "getSaveFileName", dialog)
    asked: list[list[Path]] = []
    monkeypatch.setattr(fa, "ask_overwrite", lambda _w, paths: asked.append(paths) and False)
    (tmp_path / "ds.json").write_text("mine\n", encoding="utf-8")
    assert not window.framework.handler.export_dialog("deepspeed")
    assert seen["options"] == fa.QFileDialog.Option.DontConfirmOverwrite
    assert asked == [[tmp_path / "ds.json"]]
    assert (tmp_path / "ds.json").read_text(encoding="utf-8") == "mine\n"
