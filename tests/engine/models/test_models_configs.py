"""The parameter-count table: every family's published ``config.json``, counted three ways.

``tests/data/configs/NAME.json`` holds the config of the preset ``NAME`` as its Hugging
Face repo publishes it (model-card values). Each case checks: the importer's inventory
== the hand formula of ``config_formulas`` (its docstring gives the formula) == the
preset of the same name, and the preset's architecture is exactly the import of the file.
``test_models_transformers`` holds the same files to transformers' own count.
"""

from __future__ import annotations

import pytest

from engine.models.hf_config import import_hf_config
from engine.models.inventory import build_inventory, total_params
from engine.models.presets import list_presets, load_preset, preset_names
from tests.engine.models.config_formulas import NAMES, config, expected_params

FAMILIES_REQUIRED = {
    "llama",
    "mistral",
    "qwen2",
    "qwen3",
    "gemma2",
    "gemma3",
    "phi3",
    "gpt2",
    "gpt_neox",
    "mixtral",
    "qwen3_moe",
    "deepseek_v3",
    "olmo2",
    "qwen2_moe",
    "deepseek_v2",
    "cohere",
    "cohere2",
    "starcoder2",
    "stablelm",
    "falcon",
    "granite",
    "granitemoe",
    "phimoe",
    "llama4",
}


def test_every_preset_has_a_config_and_every_family_a_preset() -> None:
    """≥ 35 presets, one config.json each; every family MemPlan models is in the table."""
    assert len(preset_names()) >= 35
    assert preset_names() == NAMES
    assert {i.family for i in list_presets()} == FAMILIES_REQUIRED


@pytest.mark.parametrize("name", NAMES)
def test_config_count_equals_formula_and_preset(name: str) -> None:
    """Importer == hand formula (``config_formulas``) == preset, for one published config."""
    cfg = config(name)
    spec = import_hf_config(cfg).spec
    ours = total_params(build_inventory(spec))
    assert ours == expected_params(cfg)
    _, preset = load_preset(name)
    assert preset == spec
    info = next(i for i in list_presets() if i.name == name)
    assert info.total == ours


def test_multimodal_wrappers_note_the_vision_tower() -> None:
    """Gemma-3, Mistral-3, Qwen2.5-VL and Llama-4 count their language model, and say so."""
    for name in ("gemma-3-4b", "mistral-small-3.1-24b", "qwen2.5-vl-7b", "llama-4-scout"):
        notes = import_hf_config(config(name)).notes
        assert any("vision tower" in n for n in notes), name


def test_deepseek_v3_config_mtp_is_explicit() -> None:
    """Off by default with a note; ``mtp=True`` adds the 11,610,068,224 unique MTP params."""
    cfg = config("deepseek-v3")
    off = import_hf_config(cfg)
    assert off.spec.mtp_layers == 0 and any("multi-token" in n for n in off.notes)
    assert total_params(build_inventory(off.spec)) == 671_026_419_200
    on = import_hf_config(cfg, mtp=True)
    assert on.spec.mtp_layers == 1 and not on.notes
    assert total_params(build_inventory(on.spec)) == 671_026_419_200 + 11_610_068_224
