"""Offline lookup by model id in a Hugging Face hub cache laid out as huggingface_hub does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.cli import main
from engine.models.hf_cache import (
    ModelNotCachedError,
    find_cached_model,
    hub_cache_dir,
    import_cached_model,
    list_cached_models,
)
from engine.models.inventory import build_inventory, total_params
from engine.planfile import load
from tests.engine.models.config_formulas import config
from tests.engine.models.test_models_safetensors import write_safetensors

COMMIT_A = "a" * 40
COMMIT_B = "b" * 40


def make_repo(cache: Path, model_id: str, cfg: dict[str, Any], commit: str = COMMIT_A) -> Path:
    """``models--ORG--NAME`` with ``refs/main`` → ``snapshots/<commit>/config.json``."""
    repo = cache / ("models--" + model_id.replace("/", "--"))
    snap = repo / "snapshots" / commit
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps(cfg))
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(commit)
    return snap


def test_cache_dir_follows_huggingface_hub_variables(tmp_path: Path) -> None:
    """HF_HUB_CACHE, else HF_HOME/hub, else XDG_CACHE_HOME/huggingface/hub, else ~/.cache."""
    assert hub_cache_dir({"HF_HUB_CACHE": str(tmp_path / "c"), "HF_HOME": "x"}) == tmp_path / "c"
    assert hub_cache_dir({"HF_HOME": str(tmp_path)}) == tmp_path / "hub"
    assert hub_cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "huggingface" / "hub"
    assert hub_cache_dir({}) == Path.home() / ".cache" / "huggingface" / "hub"


def test_finds_config_through_refs_main(tmp_path: Path) -> None:
    """refs/main decides the snapshot; a commit id or another ref can be asked for."""
    env = {"HF_HUB_CACHE": str(tmp_path)}
    make_repo(tmp_path, "meta-llama/Llama-3.1-8B", config("llama-3.1-8b"))
    old = tmp_path / "models--meta-llama--Llama-3.1-8B" / "snapshots" / COMMIT_B
    old.mkdir()
    (old / "config.json").write_text(json.dumps(config("llama-3.2-1b")))
    (tmp_path / "models--meta-llama--Llama-3.1-8B" / "refs" / "v1").write_text(COMMIT_B)
    found = import_cached_model("meta-llama/Llama-3.1-8B", env=env)
    assert found.commit == COMMIT_A and found.imported.spec is not None
    assert total_params(build_inventory(found.imported.spec)) == 8_030_261_248
    for rev in (COMMIT_B, "v1"):
        snap, commit = find_cached_model("meta-llama/Llama-3.1-8B", rev, env)
        assert (snap.name, commit) == (COMMIT_B, COMMIT_B)
    assert list_cached_models(env) == ["meta-llama/Llama-3.1-8B"]


def test_absent_model_names_the_path_searched(tmp_path: Path) -> None:
    env = {"HF_HOME": str(tmp_path)}
    with pytest.raises(ModelNotCachedError, match=r"searched .*models--org--nope"):
        find_cached_model("org/nope", env=env)
    make_repo(tmp_path / "hub", "org/m", {"model_type": "llama"})
    with pytest.raises(ModelNotCachedError, match="no ref 'dev'"):
        find_cached_model("org/m", "dev", env)
    with pytest.raises(ModelNotCachedError, match="not a Hugging Face model id"):
        find_cached_model("../etc", env=env)
    assert list_cached_models({"HF_HUB_CACHE": str(tmp_path / "none")}) == []


def test_headers_cross_checked_and_missing_shards_noted(tmp_path: Path) -> None:
    """Headers present: cross-checked. An index whose shards are not downloaded: a note."""
    env = {"HF_HUB_CACHE": str(tmp_path)}
    cfg = {
        "model_type": "llama",
        "hidden_size": 4,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": 8,
        "vocab_size": 10,
        "tie_word_embeddings": True,
    }
    snap = make_repo(tmp_path, "org/tiny", cfg)
    found = import_cached_model("org/tiny", env=env)
    assert found.imported.check is None and found.imported.stored is None
    index = {"weight_map": {"model.embed_tokens.weight": "model-00001-of-00002.safetensors"}}
    (snap / "model.safetensors.index.json").write_text(json.dumps(index))
    noted = import_cached_model("org/tiny", env=env).imported
    assert noted.check is None and any("no checkpoint cross-check" in n for n in noted.notes)
    (snap / "model.safetensors.index.json").unlink()
    write_safetensors(
        snap / "model.safetensors",
        {"model.embed_tokens.weight": ("BF16", (10, 4)), "lm_head.weight": ("BF16", (10, 4))},
    )
    untied = import_cached_model("org/tiny", env=env).imported
    assert untied.spec is not None and not untied.spec.tied_embeddings
    assert any("loads untied" in n for n in untied.notes)
    assert untied.check is not None and "lm_head.weight" not in untied.check.unexpected


def test_cli_new_and_models_by_model_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``memplan new --model ORG/NAME`` writes the cached model's plan (with --set applied);
    ``memplan models --model`` prints its counts; an absent id is one line, exit 1."""
    cache = tmp_path / "hub"
    make_repo(cache, "deepseek-ai/DeepSeek-V3", config("deepseek-v3"))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    out = tmp_path / "ds.memplan"
    argv = [
        "new",
        "-o",
        str(out),
        "--model",
        "deepseek-ai/DeepSeek-V3",
        "--set",
        "batch.seq_len=2048",
    ]
    assert main(argv) == 0
    plan = load(out).plan
    assert plan.model.name == "DeepSeek-V3" and plan.model.preset is None
    assert plan.model.architecture.mtp_layers == 0 and plan.batch.seq_len == 2048
    assert "multi-token-prediction" in capsys.readouterr().err
    assert main(["models", "--model", "deepseek-ai/DeepSeek-V3", "--mtp"]) == 0
    assert "682,636,487,424 parameters" in capsys.readouterr().out
    assert main(["new", "-o", str(tmp_path / "x.memplan"), "--model", "org/absent"]) == 1
    err = capsys.readouterr().err.strip()
    assert "not in the local Hugging Face cache" in err and len(err.splitlines()) == 1
    assert main(["new", "-o", str(out), "--model", "a/b", "--preset", "gpt2"]) == 1
