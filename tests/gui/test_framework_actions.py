"""File → Export / Import Framework Config in the window: refuses an invalid plan, writes
companions, lists what the file cannot say, checks off the GUI thread, and imports any
kind as one undo step."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QPlainTextEdit

from engine.exports import FORMATS
from gui import dialogs


@pytest.fixture
def shown(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    got: dict[str, list[str]] = {"info": [], "error": []}
    monkeypatch.setattr(dialogs, "show_info", lambda _p, _t, text: got["info"].append(text))
    monkeypatch.setattr(dialogs, "show_error", lambda _p, _t, text: got["error"].append(text))
    import gui.frameworks.framework_actions as fa  # exports over existing files ask (issue 33)

    monkeypatch.setattr(fa, "ask_overwrite", lambda _p, paths: not got["asked"].append(paths))
    got["asked"] = []
    return got


def test_menus_offer_four_exports_and_the_imports(window: Any) -> None:
    fw = window.framework
    assert set(fw.exports) == {"deepspeed", "accelerate", "torchtitan", "megatron"}
    assert fw.import_action.text() == "&Import Framework Config…"
    assert fw.import_folder_action.text() == "Import &Model Folder…"


def test_export_writes_companions_and_lists_what_it_cannot_say(
    window: Any, tmp_path: Path, shown: dict[str, list[str]]
) -> None:
    window.doc.set_many(
        {"stack.name": "hf_trainer", "parallelism.strategy": "zero3", "method.kind": "lora"},
        "setup",
    )
    out = tmp_path / "acc.yaml"
    assert window.framework.handler.export_to("accelerate", str(out))
    assert out.read_text() == FORMATS["accelerate"].export(window.doc.plan).text
    assert (tmp_path / "ds_config.json").is_file() and (tmp_path / "peft_config.py").is_file()
    (text,) = window.framework.handler.result.findChildren(QPlainTextEdit)
    assert "ds_config.json" in text.toPlainText() and "accelerate 1.15" in text.toPlainText()
    assert window.framework.handler.export_to("megatron", str(tmp_path / "train.sh"))
    assert shown["asked"] == [[tmp_path / "peft_config.py"]]  # the companion is named
    (text,) = window.framework.handler.result.findChildren(QPlainTextEdit)
    assert "Plan inputs this file cannot express" in text.toPlainText()
    assert "• stack.name: Megatron-LM runs Megatron-Core" in text.toPlainText()


def test_export_refuses_an_invalid_plan(
    window: Any, tmp_path: Path, shown: dict[str, list[str]]
) -> None:
    window.doc.set_many({"batch.global_batch": 60}, "bad batch")
    assert not window.framework.handler.export_to("deepspeed", str(tmp_path / "ds.json"))
    assert "batch.global_batch" in shown["error"][0] and not (tmp_path / "ds.json").exists()


def test_check_runs_off_the_gui_thread(qtbot: Any, window: Any, tmp_path: Path) -> None:
    pytest.importorskip("accelerate")
    window.doc.set_many({"stack.name": "hf_trainer"}, "hf")
    assert window.framework.handler.export_to("accelerate", str(tmp_path / "a.yaml"))
    result = window.framework.handler.result
    result.start_check()
    assert result.check_label.text() == "Checking…"  # returned at once: a worker runs it
    qtbot.waitUntil(lambda: result.results is not None, timeout=120_000)
    assert result.results[0].ok and "accepted" in result.check_label.text()


def test_import_is_one_undo_step_with_resolutions(
    window: Any, tmp_path: Path, shown: dict[str, list[str]]
) -> None:
    """ZeRO-3 with micro 2 × accumulation 4 and train_batch_size 64 = 2 × 4 × DP 8;
    reduce_bucket_size 'auto' = hidden² = 4096² (HF Trainer)."""
    cfg = tmp_path / "theirs.json"
    cfg.write_text(
        json.dumps(
            {
                "train_micro_batch_size_per_gpu": 2,
                "gradient_accumulation_steps": 4,
                "train_batch_size": 64,
                "zero_optimization": {"stage": 3, "reduce_bucket_size": "auto"},
                "bf16": {"enabled": True},
            }
        )
    )
    assert window.framework.handler.import_path(str(cfg))
    plan = window.doc.plan
    assert plan.parallelism.strategy == "zero3" and plan.parallelism.dp == 8
    assert (plan.batch.micro_batch, plan.batch.grad_accum) == (2, 4)
    assert plan.parallelism.knobs.ds_reduce_bucket_elements == 4096 * 4096
    assert window.doc.undo_stack.count() == 1
    assert window.doc.undo_stack.undoText() == "Import theirs.json"
    assert "Resolved: zero_optimization.reduce_bucket_size 'auto' = 16777216" in shown["info"][0]


def test_import_refuses_what_it_cannot_read(
    window: Any, tmp_path: Path, shown: dict[str, list[str]]
) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_text("hello")
    assert not window.framework.handler.import_path(str(bad))
    assert "cannot tell what notes.txt is" in shown["error"][0]
    assert window.doc.undo_stack.count() == 0
