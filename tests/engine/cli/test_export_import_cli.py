"""``memplan export`` refuses invalid plans and can check; ``memplan import`` reads the five
file kinds, fills ``auto`` as the HF Trainer does, and warns about every key it skips."""

from __future__ import annotations

import json
import struct
from math import prod
from pathlib import Path

import pytest

from engine.cli import main
from engine.estimate import estimate
from engine.models.hf_config import import_hf_config
from engine.models.inventory import build_inventory
from engine.planfile import load
from engine.presets import model_section_for

HF_DIR = Path(__file__).resolve().parents[2] / "data" / "configs"


def _import(tmp_path: Path, name: str, text: str, *extra: str) -> tuple[int, Path]:
    src = tmp_path / name
    src.write_text(text, encoding="utf-8")
    out = tmp_path / "got.memplan"
    return main(["import", str(src), "-o", str(out), *extra]), out


def test_export_refuses_a_plan_that_does_not_validate(capsys: pytest.CaptureFixture[str]) -> None:
    """Global batch 60 with micro 1 and DP 8 is not a whole accumulation count:
    DeepSpeed would refuse the file, so MemPlan does not write it."""
    assert main(["export", "--format", "deepspeed", "--set", "batch.global_batch=60"]) == 1
    err = capsys.readouterr().err
    assert "plan does not validate, not exported" in err and "batch.global_batch" in err


def test_export_writes_companions_and_lists_what_it_cannot_say(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "acc.yaml"
    sets = ["--set", "stack.name=hf_trainer", "--set", "parallelism.strategy=zero3"]
    sets += ["--set", "method.kind=lora"]
    assert main(["export", "--format", "accelerate", *sets, "-o", str(out)]) == 0
    assert (tmp_path / "ds_config.json").is_file() and (tmp_path / "peft_config.py").is_file()
    assert main(["export", "--format", "megatron"]) == 0
    err = capsys.readouterr().err
    assert "not expressed: stack.name" in err and "targets Megatron-LM" in err


def test_check_says_which_package_is_needed(capsys: pytest.CaptureFixture[str]) -> None:
    """DeepSpeed is not installed here: the check names it and does not fail the export."""
    pytest.importorskip("accelerate")
    try:
        import deepspeed  # noqa: F401
    except ImportError:
        pass
    else:  # pragma: no cover - only where DeepSpeed is installed
        pytest.skip("DeepSpeed is installed")
    sets = ["--set", "parallelism.strategy=zero2"]
    assert main(["export", "--format", "deepspeed", *sets, "--check"]) == 0
    assert "check (deepspeed): not checked: install deepspeed" in capsys.readouterr().err


def test_check_runs_accelerates_own_classes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("accelerate")
    sets = ["--set", "stack.name=hf_trainer", "--set", "parallelism.strategy=fsdp2_hsdp"]
    sets += ["--set", "parallelism.dp=16", "--set", "parallelism.shard_group_size=8"]
    out = str(tmp_path / "a.yaml")
    assert main(["export", "--format", "accelerate", *sets, "-o", out, "--check"]) == 0
    err = capsys.readouterr().err
    assert "check (accelerate): accepted" in err and "ParallelismConfig 2x8x1x1" in err


def test_import_ds_config_fills_auto_as_the_hf_trainer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Llama-3.1-8B, hidden 4096: reduce_bucket_size = 4096² = 16,777,216;
    stage3_prefetch_bucket_size = int(0.9 · 4096²) = 15,099,494; persistence = 40,960
    (transformers integrations/deepspeed.py trainer_config_finalize)."""
    ds = {
        "train_batch_size": "auto",
        "train_micro_batch_size_per_gpu": "auto",
        "gradient_accumulation_steps": "auto",
        "bf16": {"enabled": "auto"},
        "data_types": {"grad_accum_dtype": "fp32"},
        "activation_checkpointing": {"cpu_checkpointing": True},
        "zero_optimization": {
            "stage": 3,
            "cpu_offload": True,
            "reduce_bucket_size": "auto",
            "stage3_prefetch_bucket_size": "auto",
            "stage3_param_persistence_threshold": "auto",
            "zero_hpz_partition_size": 8,
            "zero_quantized_weights": True,
        },
    }
    rc, out = _import(tmp_path, "ds.json", json.dumps(ds))
    assert rc == 0
    err = capsys.readouterr().err
    plan = load(out).plan
    k = plan.parallelism.knobs
    assert k.ds_reduce_bucket_elements == 16_777_216
    assert k.ds_prefetch_bucket_elements == 15_099_494
    assert k.ds_param_persistence_threshold == 40_960
    assert plan.method.precision.grad_dtype == "fp32"
    assert plan.method.recompute.policy == "offload" and plan.offload.optimizer == "cpu"
    assert "resolved: bf16.enabled 'auto' = true" in err
    for key in ("cpu_offload is deprecated", "zero_hpz_partition_size", "zero_quantized_weights"):
        assert key in err


def test_import_accelerate_fsdp_offload_is_estimable(tmp_path: Path) -> None:
    text = (
        "distributed_type: FSDP\nmixed_precision: bf16\nnum_processes: 8\nfsdp_config:\n"
        "  fsdp_version: 2\n  fsdp_offload_params: true\n"
    )
    rc, out = _import(tmp_path, "acc.yaml", text)
    assert rc == 0
    plan = load(out).plan
    assert (plan.offload.params, plan.offload.optimizer) == ("cpu", "cpu")
    assert estimate(plan).peak.high > 0


def test_import_hf_config_with_dtype_auto(tmp_path: Path) -> None:
    cfg = json.loads((HF_DIR / "llama-3.1-8b.json").read_text())
    cfg["torch_dtype"] = "auto"
    rc, out = _import(tmp_path, "config.json", json.dumps(cfg))
    assert rc == 0
    arch = load(out).plan.model.architecture
    assert arch == model_section_for("llama-3.1-8b").architecture


def _safetensors(folder: Path, spec_json: dict[str, object]) -> None:
    """A model folder whose safetensors header lists every tensor of the config (bf16,
    zero data): the importer reads headers only."""
    spec = import_hf_config({**spec_json, "torch_dtype": "bfloat16"}).spec
    header: dict[str, object] = {}
    offset = 0
    for t in build_inventory(spec):
        size = 2 * prod(t.shape)
        header[t.name] = {
            "dtype": "BF16",
            "shape": list(t.shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    raw = json.dumps(header).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(offset))
    (folder / "config.json").write_text(json.dumps(spec_json))


def test_import_model_folder(tmp_path: Path) -> None:
    folder = tmp_path / "tiny-llama"
    folder.mkdir()
    cfg = {
        "model_type": "llama",
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 128,
        "vocab_size": 100,
        "torch_dtype": "auto",
    }
    _safetensors(folder, cfg)
    out = tmp_path / "m.memplan"
    assert main(["import", str(folder), "-o", str(out)]) == 0
    plan = load(out).plan
    assert plan.model.name == "tiny-llama" and plan.model.architecture.hidden == 64
    assert plan.model.architecture.stored_dtype == "bf16"


def test_import_megatron_script_and_torchtitan_recipe(tmp_path: Path) -> None:
    meg = tmp_path / "train.sh"
    assert main(["export", "--format", "megatron", "--preset", "mixtral-8x7b", "-o", str(meg)]) == 0
    out = tmp_path / "m.memplan"
    assert main(["import", str(meg), "-o", str(out)]) == 0
    got = load(out).plan
    assert got.model.architecture.moe is not None and got.stack.name == "megatron_core"
    rec = tmp_path / "memplan_recipe.py"
    sets = ["--set", "stack.name=torchtitan", "--set", "parallelism.dp=4"]
    assert main(["export", "--format", "torchtitan", *sets, "-o", str(rec)]) == 0
    assert main(["import", str(rec), "-o", str(out)]) == 0
    assert load(out).plan.parallelism.dp == 4
