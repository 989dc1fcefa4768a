"""The plan keeps the config.json its architecture was imported from (``model.hf_config``).

It is an input (it is in the config hash when set), but a plan without one hashes as it
did before the field existed, so every saved file and stored record keeps its hash.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.exports.cached_model import model_section_for_cached
from engine.models.hf_cache import import_cached_model
from engine.models.hf_config import import_hf_config, spec_from_hf_config
from engine.models.importer import import_model_folder
from engine.plan import Plan, canonical_hash, with_values
from engine.planfile import PlanFile, dumps, load, parse, save
from tests.engine.models.config_formulas import NAMES, config
from tests.engine.models.test_models_hf_cache import make_repo
from tests.engine.models.test_models_safetensors import write_safetensors

TINY = {
    "model_type": "llama",
    "hidden_size": 4,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "intermediate_size": 8,
    "vocab_size": 10,
    "tie_word_embeddings": True,
}


def hash_as_before_the_field(plan: Plan) -> str:
    """The hash a MemPlan without ``model.hf_config`` gave this plan: its full JSON dump
    (every other input, ``None`` ones included) with the field's key removed. Derived, not
    pinned, so that inputs added later (with their own defaults) do not break this test.
    Inputs added later that are themselves left out of the canonical form at their
    default (:data:`LEFT_OUT_AT_DEFAULT`) are
    removed too: the hash never saw them at that default."""
    tree = plan.model_dump(mode="json")
    del tree["model"]["hf_config"]
    for path, default in LEFT_OUT_AT_DEFAULT:
        *parents, key = path.split(".")
        node = tree
        for part in parents:
            node = node[part]
        if node[key] == default:
            del node[key]
    if tree["runtime"]["cublas_workspace_bytes"] is None:  # auto hashes as the old band
        tree["runtime"]["cublas_workspace_bytes"] = {"low": 8 * 2**20, "high": 32 * 2**20}
    return canonical_hash(tree)


LEFT_OUT_AT_DEFAULT = (
    ("method.qlora.nf4_impl", "bitsandbytes"),
    ("method.qlora.quantized_from", "any"),
    ("method.optimizer.adam8bit_library", "bitsandbytes"),
    ("method.lora.implementation", "peft"),
    ("runtime.previous_output_kept", False),
)


DEFAULT_PLAN_HASH = hash_as_before_the_field(Plan())


def test_a_plan_without_an_import_keeps_its_hash() -> None:
    plan = Plan()
    assert plan.model.hf_config is None
    assert plan.config_hash() == DEFAULT_PLAN_HASH
    assert "hf_config" not in plan.to_canonical_json()
    assert plan.model_dump(mode="json")["model"]["hf_config"] is None  # paths still see it


def test_an_imported_config_is_an_input_and_round_trips(tmp_path: Path) -> None:
    plan = with_values(Plan(), {"model.hf_config": TINY})
    assert plan.config_hash() != DEFAULT_PLAN_HASH
    assert hash(plan) == hash(with_values(Plan(), {"model.hf_config": dict(TINY)}))
    path = tmp_path / "p.memplan"
    save(PlanFile(plan=plan), path)
    back = load(path)
    assert back.plan == plan and back.plan.model.hf_config == TINY
    assert back.extra_messages == ()


def test_a_file_written_before_the_field_loads_with_its_hash() -> None:
    """A file without the key (as every earlier version wrote it) loads, and its stored
    hash still matches: no "edited by hand?" message."""
    doc = json.loads(dumps(PlanFile(plan=Plan())))
    del doc["plan"]["model"]["hf_config"]
    pf = parse(json.dumps(doc))
    assert pf.extra_messages == () and pf.plan.config_hash() == doc["config_hash"]


def test_the_kept_config_reads_back_as_the_architecture() -> None:
    """For a plain config the file itself; for a multimodal wrapper its language model's
    config, under the text model's model_type (what the architecture describes)."""
    plain = import_hf_config(TINY)
    assert plain.config == TINY and spec_from_hf_config(plain.config) == plain.spec
    wrapped = import_hf_config(config("gemma-3-4b"))
    assert wrapped.config["model_type"] == "gemma3_text"
    assert "vision_config" not in wrapped.config
    assert spec_from_hf_config(wrapped.config) == wrapped.spec


@pytest.mark.parametrize("name", NAMES)
def test_every_published_config_reads_back_from_what_the_plan_keeps(name: str) -> None:
    imported = import_hf_config(config(name))
    assert spec_from_hf_config(imported.config) == imported.spec


def test_folder_import_keeps_the_config_untied_like_the_spec(tmp_path: Path) -> None:
    """A tied config over a checkpoint with its own lm_head.weight loads untied, so the
    kept config says so too (the trace builds from it without the weights)."""
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    assert import_model_folder(tmp_path).config == TINY
    write_safetensors(
        tmp_path / "model.safetensors",
        {"model.embed_tokens.weight": ("BF16", (10, 4)), "lm_head.weight": ("BF16", (10, 4))},
    )
    got = import_model_folder(tmp_path)
    assert got.config == {**TINY, "tie_word_embeddings": False}
    assert got.spec is not None and spec_from_hf_config(got.config) == got.spec


def test_cached_model_section_carries_its_config(tmp_path: Path) -> None:
    env = {"HF_HUB_CACHE": str(tmp_path)}
    make_repo(tmp_path, "org/tiny", TINY)
    assert import_cached_model("org/tiny", env=env).imported.config == TINY


def test_model_section_by_model_id_keeps_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_repo(tmp_path, "org/tiny", TINY)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    section = model_section_for_cached("org/tiny").section
    assert section.hf_config == TINY and section.preset is None


def test_the_kept_config_is_one_input_where_inputs_are_listed() -> None:
    """Comparisons and the report list inputs leaf by leaf; the config.json is one of
    them, not one input per key of the file."""
    from engine.plan import free_json_paths
    from engine.whatif.compare import input_differences

    assert free_json_paths() == {"model.hf_config"}
    plan = with_values(Plan(), {"model.hf_config": TINY})
    diffs = input_differences([Plan(), plan])
    assert [d.path for d in diffs] == ["model.hf_config"]
    assert diffs[0].values == (None, TINY)
