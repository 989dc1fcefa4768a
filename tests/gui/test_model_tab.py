"""The Model tab's sources: presets, a config.json, a model folder with its cross-check."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QMessageBox

from engine.models.inventory import build_inventory, total_params

SMOL_CONFIG = {
    "model_type": "llama",
    "hidden_size": 576,
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "intermediate_size": 1536,
    "vocab_size": 49152,
    "tie_word_embeddings": True,
    "max_position_embeddings": 8192,
    "rms_norm_eps": 1e-5,
    "torch_dtype": "bfloat16",
}
"""SmolLM-135M's config.json (134,515,008 parameters)."""


def _settle(qtbot: Any, win: Any) -> None:
    qtbot.waitUntil(lambda: not win.doc.pending)


def test_apply_a_preset_is_one_undo_step(qtbot: Any, window: Any) -> None:
    """Mixtral-8x7B: 46,702,792,704 parameters (its published safetensors total)."""
    tab = window.tabs["model"]
    tab.preset.setCurrentIndex(tab.preset.findData("mixtral-8x7b"))
    tab.apply_preset()
    _settle(qtbot, window)
    arch = window.doc.plan.model.architecture
    assert total_params(build_inventory(arch)) == 46_702_792_704
    assert window.doc.plan.model.preset == "mixtral-8x7b"
    assert window.doc.undo_stack.count() == 1
    window.doc.undo_stack.undo()
    _settle(qtbot, window)
    assert window.doc.plan.model.preset == "llama-3.1-8b"


def test_import_config_json(qtbot: Any, window: Any, tmp_path: Path) -> None:
    (tmp_path / "smol").mkdir()
    cfg = tmp_path / "smol" / "config.json"
    cfg.write_text(json.dumps(SMOL_CONFIG), encoding="utf-8")
    assert window.tabs["model"].import_path(str(cfg), folder=False)
    _settle(qtbot, window)
    arch = window.doc.plan.model.architecture
    assert total_params(build_inventory(arch)) == 134_515_008
    assert window.doc.plan.model.name == "smol"


def test_bad_config_shows_the_engine_message_and_changes_nothing(
    qtbot: Any, window: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shown: list[str] = []
    monkeypatch.setattr(QMessageBox, "warning", lambda *a: shown.append(a[2]))
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({**SMOL_CONFIG, "num_hidden_layers": None}), encoding="utf-8")
    before = window.doc.plan
    assert not window.tabs["model"].import_path(str(cfg), folder=False)
    assert window.doc.plan == before
    assert shown and "num_hidden_layers" in shown[0]


def _write_safetensors(path: Path, tensors: dict[str, tuple[int, ...]]) -> None:
    header: dict[str, Any] = {}
    offset = 0
    for name, shape in tensors.items():
        n = 2
        for d in shape:
            n *= d
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(offset))


def test_import_folder_reports_checkpoint_mismatch(
    qtbot: Any, window: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder whose safetensors lack one layer's tensors: the config's architecture is
    imported, and the cross-check's complaints are shown to the user."""
    folder = tmp_path / "tiny"
    folder.mkdir()
    cfg = {
        **SMOL_CONFIG,
        "hidden_size": 8,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "intermediate_size": 4,
        "vocab_size": 6,
    }
    (folder / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    window.tabs["model"].import_path(str(folder / "config.json"), folder=False)
    _settle(qtbot, window)
    arch = window.doc.plan.model.architecture
    tensors = {t.name: t.shape for t in build_inventory(arch) if t.layer != 1}
    _write_safetensors(folder / "model.safetensors", tensors)
    shown: list[str] = []
    monkeypatch.setattr(QMessageBox, "information", lambda *a: shown.append(a[2]))
    assert window.tabs["model"].import_path(str(folder), folder=True)
    _settle(qtbot, window)
    assert window.doc.plan.model.name == "tiny"
    assert shown and "layers.1" in shown[0]


def test_preset_chooser_shows_the_plan_s_preset(qtbot: Any, window: Any) -> None:
    assert window.tabs["model"].preset.currentData() == "llama-3.1-8b"
