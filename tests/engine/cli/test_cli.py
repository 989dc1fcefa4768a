"""The engine's command line: overrides, output and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main
from engine.cli.common import CliError, apply_sets, parse_set
from engine.plan import default_plan
from engine.planfile import SCHEMA_VERSION, load


def test_parse_set_types_values() -> None:
    assert parse_set("batch.seq_len=8192") == ("batch.seq_len", 8192)
    assert parse_set("parallelism.sequence_parallel=true") == (
        "parallelism.sequence_parallel",
        True,
    )
    assert parse_set("parallelism.strategy=zero3") == ("parallelism.strategy", "zero3")
    assert parse_set("batch.global_batch=null") == ("batch.global_batch", None)
    assert parse_set('method.lora.targets=["q","v"]') == ("method.lora.targets", ["q", "v"])
    assert parse_set("model.name=a=b") == ("model.name", "a=b")


def test_apply_sets_validates_like_a_file() -> None:
    plan = apply_sets(default_plan(), ["batch.seq_len=8192", "parallelism.strategy=zero3"])
    assert plan.batch.seq_len == 8192 and plan.parallelism.strategy == "zero3"
    with pytest.raises(CliError, match=r"plan\.batch\.seq_len: must be at least 1 \(got -1\)"):
        apply_sets(default_plan(), ["batch.seq_len=-1"])
    with pytest.raises(CliError, match="unknown field 'batch.seqlen'"):
        apply_sets(default_plan(), ["batch.seqlen=1"])
    with pytest.raises(CliError, match="plan.parallelism.strategy: Input should be"):
        apply_sets(default_plan(), ["parallelism.strategy=zero9"])


@pytest.mark.parametrize("bad", ["batch.seq_len", "=5", "seq_len=5"])
def test_malformed_set_is_a_usage_error(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "--set", bad]) == 2
    assert "--set" in capsys.readouterr().err


def test_estimate_default_plan_prints_rows_and_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate"]) == 0
    out = capsys.readouterr().out
    assert "hbm.weights" in out and "4,015,130,624" in out
    assert "Verdict:" in out and "GB /" in out and "GiB" in out


def test_estimate_json_is_the_documented_object(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["config_hash"] == default_plan().config_hash()
    assert doc["schema_version"] == SCHEMA_VERSION and doc["world_size"] == 8
    row = next(r for r in doc["rows"] if r["id"] == "hbm.grads")
    assert set(row) >= {
        "id",
        "label",
        "location",
        "kind",
        "low_bytes",
        "high_bytes",
        "formula",
        "source",
    }
    assert row["low_bytes"] == row["high_bytes"] == 4_015_130_624
    assert doc["fit"]["verdict"] in ("fits", "straddles", "does_not_fit")
    assert doc["totals"]["hbm"]["high_bytes"] == sum(
        r["high_bytes"] for r in doc["rows"] if r["location"] == "hbm"
    )


def test_bad_plan_exits_1_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["estimate", "--set", "batch.micro_batch=0"]) == 1
    assert "plan.batch.micro_batch" in capsys.readouterr().err
    bad = tmp_path / "bad.memplan"
    bad.write_text("{", encoding="utf-8")
    assert main(["estimate", str(bad)]) == 1
    assert main(["validate", str(bad)]) == 1
    assert "not valid JSON" in capsys.readouterr().err


def test_impossible_layout_exits_1_with_reason(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "--set", "parallelism.tp=3"]) == 1
    assert "must divide the 32 attention heads" in capsys.readouterr().err


def test_wrong_usage_exits_2() -> None:
    with pytest.raises(SystemExit) as info:
        main(["estimate", "--units", "furlongs"])
    assert info.value.code == 2
    assert main([]) == 2


def test_new_then_validate_then_estimate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "mine.memplan"
    assert main(["new", "-o", str(out), "--set", "batch.seq_len=2048"]) == 0
    assert load(out).plan.batch.seq_len == 2048
    assert main(["new", "-o", str(out)]) == 1  # refuses to overwrite
    assert main(["validate", str(out)]) == 0
    assert "valid MemPlan plan" in capsys.readouterr().out
    assert main(["estimate", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["config_hash"] == load(out).config_hash


def test_memplan_script_without_display_says_so_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gui.__main__ import main as script_main

    for var in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr("sys.platform", "linux")
    assert script_main([]) == 1
    err = capsys.readouterr().err
    assert "no display" in err and err.count("\n") == 1


def test_models_lists_every_preset(capsys: pytest.CaptureFixture[str]) -> None:
    from engine.models.presets import preset_names

    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in preset_names())
    assert "8,030,261,248" in out


def test_estimate_with_a_preset_and_an_unknown_one(capsys: pytest.CaptureFixture[str]) -> None:
    """SmolLM-135M under the default FSDP2 × 8 plan: fp32 weights shard of
    134,515,008 params; every row is recomputed for the preset's architecture."""
    assert main(["estimate", "--preset", "smollm-135m", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    weights = next(r for r in doc["rows"] if r["id"] == "hbm.weights")
    assert "134,515,008 elements" in weights["formula"]
    assert main(["estimate", "--preset", "no-such-model"]) == 1
    assert "no-such-model" in capsys.readouterr().err


def test_estimate_stages_shows_every_stage(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["estimate", "--set", "parallelism.pp=2", "--set", "parallelism.dp=4", "--stages"])
        == 0
    )
    out = capsys.readouterr().out
    assert "Stage 0 ledger" in out and "Stage 1 ledger" in out and "← heaviest" in out
