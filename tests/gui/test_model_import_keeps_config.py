"""An import in the Model tab keeps its config.json in the plan; a preset clears it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.gui.test_model_tab import SMOL_CONFIG


def test_import_keeps_the_config_and_a_preset_clears_it(
    qtbot: Any, window: Any, tmp_path: Path
) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(SMOL_CONFIG), encoding="utf-8")
    tab = window.tabs["model"]
    assert tab.import_path(str(cfg), folder=False)
    qtbot.waitUntil(lambda: not window.doc.pending)
    assert window.doc.plan.model.hf_config == SMOL_CONFIG
    assert window.doc.undo_stack.count() == 1  # architecture and config: one step
    tab.preset.setCurrentIndex(tab.preset.findData("gpt2"))
    tab.apply_preset()
    qtbot.waitUntil(lambda: not window.doc.pending)
    assert window.doc.plan.model.hf_config is None
    window.doc.undo_stack.undo()
    assert window.doc.plan.model.hf_config == SMOL_CONFIG


def test_folder_import_keeps_the_config(qtbot: Any, window: Any, tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(SMOL_CONFIG), encoding="utf-8")
    assert window.tabs["model"].import_path(str(tmp_path), folder=True)
    qtbot.waitUntil(lambda: not window.doc.pending)
    assert window.doc.plan.model.hf_config == SMOL_CONFIG


def test_the_report_lists_the_kept_config_as_one_input() -> None:
    from engine.plan import Plan, with_values
    from gui.report.inputs import section_inputs

    plan = with_values(Plan(), {"model.hf_config": SMOL_CONFIG})
    lines = [ln for ln in section_inputs(plan, "model") if ln.path.startswith("model.hf_config")]
    assert [ln.path for ln in lines] == ["model.hf_config"]
    assert lines[0].value_text == f"JSON object of {len(SMOL_CONFIG)} keys (llama)"
    assert not lines[0].is_default
