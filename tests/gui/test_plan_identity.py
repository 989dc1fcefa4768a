"""A plan's name and notes: edited in File → Properties…, undoable, in the window title,
the saved file, the report's title page and the report's default file name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QDialog

from engine import planfile
from gui import dialogs
from gui.plan_properties import PropertiesDialog
from gui.report.actions import report_file_name
from gui.report.content import gather
from gui.report.sections.title import title_page

NAME = "Llama 8B baseline, 8×H100"
NOTES = "Budget line 4.2 — compare with the LoRA variant before ordering."


def test_properties_dialog_renames_the_plan_as_one_undo_step(qtbot: Any, window: Any) -> None:
    def fill() -> None:
        dialog = next(w for w in QApplication.topLevelWidgets() if isinstance(w, PropertiesDialog))
        dialog.name.setText(NAME)
        dialog.notes.setPlainText(NOTES)
        dialog.accept()

    QTimer.singleShot(0, fill)
    window.properties_action.trigger()
    assert (window.doc.name, window.doc.notes) == (NAME, NOTES)
    assert window.windowTitle().startswith(NAME) and window.isWindowModified()
    assert window.doc.undo_stack.undoText() == "Rename plan"
    window.doc.undo()
    assert window.doc.name == "Untitled plan" and window.windowTitle().startswith("Untitled")


def test_cancel_changes_nothing(qtbot: Any, window: Any) -> None:
    QTimer.singleShot(
        0,
        lambda: next(w for w in QApplication.topLevelWidgets() if isinstance(w, QDialog)).reject(),
    )
    window.properties_action.trigger()
    assert window.doc.undo_stack.count() == 0 and window.doc.name == "Untitled plan"


def test_name_and_notes_reach_the_file_and_the_report(
    window: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    window.doc.set_properties(NAME, NOTES)
    target = tmp_path / "baseline.memplan"
    monkeypatch.setattr(dialogs, "save_path", lambda _p, _s: str(target))
    assert window.files.save_plan_as()
    saved = planfile.load(target)
    assert (saved.name, saved.notes) == (NAME, NOTES)
    assert window.windowTitle().startswith(f"{NAME} — baseline.memplan")
    page = title_page(gather(window.doc.to_planfile(), "gb"))
    assert "Llama 8B baseline, 8×H100" in page and "Budget line 4.2" in page
    assert report_file_name(window.doc.name) == "Llama-8B-baseline-8-H100-report.pdf"


def test_framework_config_export_and_import_from_the_window(
    qtbot: Any, window: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """File → Export Framework Config writes the engine's DeepSpeed export; File → Import
    Framework Config… applies a ds_config.json as one undo step: ZeRO stage 3 with
    micro-batch 2 × accumulation 4 and train_batch_size 64 = 2 × 4 × DP 8."""
    import json

    from engine.exports import EXPORTERS

    shown: list[str] = []
    monkeypatch.setattr(dialogs, "show_info", lambda _p, _t, text: shown.append(text))
    out = tmp_path / "ds_config.json"
    assert window.framework.handler.export_to("deepspeed", str(out))
    assert out.read_text(encoding="utf-8") == EXPORTERS["deepspeed"](window.doc.plan).text
    cfg = tmp_path / "theirs.json"
    cfg.write_text(
        json.dumps(
            {
                "train_micro_batch_size_per_gpu": 2,
                "gradient_accumulation_steps": 4,
                "train_batch_size": 64,
                "zero_optimization": {"stage": 3},
                "bf16": {"enabled": True},
            }
        ),
        encoding="utf-8",
    )
    assert window.framework.handler.import_path(str(cfg))
    plan = window.doc.plan
    assert plan.parallelism.strategy == "zero3" and plan.parallelism.dp == 8
    assert (plan.batch.micro_batch, plan.batch.grad_accum) == (2, 4)
    assert window.doc.undo_stack.count() == 1
    assert window.doc.undo_stack.undoText() == "Import theirs.json"
