"""Every export uses only keys its framework knows (the vendored vocabularies), and
says the job the plan describes (issue 16's findings, each pinned)."""

from __future__ import annotations

import ast
import json

import pytest
from framework_keys import UNKNOWN, vocabulary
from hypothesis import HealthCheck, given, settings
from test_round_trip import BASES, plans

from engine.exports import FORMATS
from engine.exports.accelerate import export_accelerate
from engine.exports.deepspeed import ds_config
from engine.exports.flat_yaml import read_flat_yaml
from engine.exports.megatron import export_megatron
from engine.exports.mlm_import import parse_args
from engine.exports.torchtitan import export_torchtitan
from engine.plan import Plan, with_values


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(plan=plans())
def test_every_key_is_in_the_framework_vocabulary(fmt: str, plan: Plan) -> None:
    exp = FORMATS[fmt].export(plan)
    assert UNKNOWN[fmt](exp.text) == [], exp.text
    for extra in exp.extras:
        if extra.filename.endswith(".json"):
            assert UNKNOWN["deepspeed"](extra.text) == []
        else:
            ast.parse(extra.text)  # the PEFT snippet is valid Python


def test_vocabularies_record_their_version() -> None:
    for fw in ("deepspeed", "accelerate", "torchtitan", "megatron"):
        doc = vocabulary(fw)
        assert doc["version"] and doc["how"]
    assert vocabulary("deepspeed")["version"].startswith("0.19")
    assert vocabulary("accelerate")["version"] == "1.15.0"


def _plan(model: str = "llama-3.1-8b", **changes: object) -> Plan:
    return with_values(BASES[model], dict(changes))


def test_deepspeed_autocast_is_torch_autocast_not_bf16() -> None:
    """fp32 weights + autocast (the FSDP default) must not become bf16.enabled, which
    DeepSpeed runs as bf16 weights + an fp32 master (runtime/engine.py _configure_
    bf16/fp16: module.to(bf16), the optimizer keeps fp32 partitions)."""
    cfg, _ = ds_config(
        _plan(**{"parallelism.strategy": "zero3", "method.precision.policy": "autocast"})
    )
    assert "bf16" not in cfg and cfg["torch_autocast"] == {"enabled": True, "dtype": "bfloat16"}
    amp, _ = ds_config(_plan(**{"parallelism.strategy": "zero3"}))
    assert amp["bf16"] == {"enabled": True} and "data_types" not in amp
    fp32_grads, _ = ds_config(
        _plan(**{"parallelism.strategy": "zero2", "method.precision.grad_dtype": "fp32"})
    )
    assert fp32_grads["data_types"] == {"grad_accum_dtype": "fp32"}


def test_deepspeed_nvme_offload_carries_path_and_buffers() -> None:
    cfg, _ = ds_config(
        _plan(
            **{
                "parallelism.strategy": "zero3",
                "offload.params": "nvme",
                "offload.optimizer": "nvme",
                "offload.param_buffer_count": 7,
            }
        )
    )
    z = cfg["zero_optimization"]
    assert z["offload_param"]["nvme_path"] and z["offload_optimizer"]["nvme_path"]
    assert z["offload_param"]["buffer_count"] == 7 and "aio" in cfg
    assert z["overlap_comm"] is True  # stage 3's default, written out
    z2 = ds_config(_plan(**{"parallelism.strategy": "zero2"}))[0]["zero_optimization"]
    assert z2["overlap_comm"] is False


def test_accelerate_hsdp_is_parallelism_config() -> None:
    """HSDP over 16 ranks in groups of 8: dp_replicate 2 × dp_shard 8 (× TP 1 × CP 1)."""
    plan = _plan(
        **{
            "stack.name": "hf_trainer",
            "parallelism.strategy": "fsdp2_hsdp",
            "parallelism.dp": 16,
            "parallelism.shard_group_size": 8,
        }
    )
    exp = export_accelerate(plan)
    cfg = read_flat_yaml(exp.text)
    pc = cfg["parallelism_config"]
    assert pc["parallelism_config_dp_replicate_size"] == 2
    assert pc["parallelism_config_dp_shard_size"] == 8
    yaml = pytest.importorskip("yaml")
    assert yaml.safe_load(exp.text) == cfg  # the subset written is real YAML


def test_accelerate_int_reshard_is_listed_not_silently_true() -> None:
    exp = export_accelerate(
        _plan(**{"stack.name": "hf_trainer", "parallelism.knobs.fsdp_reshard_after_forward": 4})
    )
    assert "parallelism.knobs.fsdp_reshard_after_forward" in {u.field for u in exp.unexpressed}
    assert "# MemPlan: plan inputs this file cannot express:" in exp.text


def test_accelerate_deepspeed_points_at_the_full_ds_config() -> None:
    exp = export_accelerate(_plan(**{"stack.name": "hf_trainer", "parallelism.strategy": "zero3"}))
    cfg = read_flat_yaml(exp.text)
    assert cfg["deepspeed_config"]["deepspeed_config_file"] == "ds_config.json"
    assert cfg["deepspeed_config"]["zero3_init_flag"] is True
    (ds,) = [e for e in exp.extras if e.filename == "ds_config.json"]
    assert json.loads(ds.text)["zero_optimization"]["stage"] == 3


def test_torchtitan_recipe_targets_the_config_mechanism() -> None:
    """torchtitan 0.3.0 (``config/configs.py`` ``TrainingConfig``): micro-batch 2 is
    ``local_batch_size 2``; the default plan's 8 DP ranks × 2 × accumulation 1 is
    ``global_batch_size 16``; no float16; CPU offload as ``training.enable_cpu_offload``,
    the same values as tyro overrides in the docstring (``--training.enable-cpu-offload``)."""
    plan = _plan(
        **{
            "stack.name": "torchtitan",
            "batch.micro_batch": 2,
            "offload.params": "cpu",
            "offload.optimizer": "cpu",
        }
    )
    assert (plan.parallelism.dp, plan.batch.grad_accum) == (8, 1)
    text = export_torchtitan(plan).text
    assert "def memplan_job() -> Trainer.Config:" in text and "MODULE=memplan_recipe" in text
    assert "config.training.local_batch_size = 2" in text
    assert "config.training.global_batch_size = 16" in text
    assert "config.training.enable_cpu_offload = True" in text
    assert "--training.local-batch-size 2 --training.global-batch-size 16" in text
    assert "--training.enable-cpu-offload " in text
    assert "num_tokens_per" not in text and "num_pp_microbatches" not in text
    fp16 = export_torchtitan(_plan(**{"method.precision.compute_dtype": "fp16"}))
    assert "method.precision.compute_dtype" in {u.field for u in fp16.unexpressed}


def test_torchtitan_pp_recipe_splits_local_batch_into_pipeline_microbatches() -> None:
    """0.3.0's trainer runs local_batch_size ÷ pipeline_parallel_microbatch_size
    microbatches in one accumulation step (``trainer.py``), so a PP plan of micro 1 ×
    accumulation 8 is local 8, microbatch size 1, and CUDA graphs off
    (``Trainer.Config._validate_cuda_graphs`` refuses PP with them)."""
    plan = _plan(
        "llama-3.1-70b",
        **{
            "stack.name": "torchtitan",
            "parallelism.strategy": "fsdp2",
            "parallelism.dp": 4,
            "parallelism.pp": 2,
            "batch.micro_batch": 1,
            "batch.grad_accum": 8,
        },
    )
    text = export_torchtitan(plan).text
    assert "config.training.local_batch_size = 8" in text
    assert "config.parallelism.pipeline_parallel_microbatch_size = 1" in text
    assert "config.training.disable_cuda_graphs = True" in text
    assert "config.training.global_batch_size = 32" in text  # 1 × 8 × DP 4


def test_megatron_states_the_model_megatron_would_otherwise_change() -> None:
    """Llama: no biases, SwiGLU, RMSNorm, dropout 0; Qwen2.5: qkv bias only; Gemma-2-9B:
    head dim 256 ≠ 3584 / 16 (--kv-channels); Mixtral: 8 experts top-2 with EP."""
    a = parse_args(export_megatron(_plan()).text)[0]
    assert a["--disable-bias-linear"] is True and a["--swiglu"] is True
    assert a["--normalization"] == "RMSNorm" and a["--hidden-dropout"] == 0.0
    q = parse_args(export_megatron(_plan("qwen2.5-7b")).text)[0]
    assert q["--disable-bias-linear"] is True and q["--add-qkv-bias"] is True
    g = parse_args(export_megatron(_plan("gemma-2-9b")).text)[0]
    assert g["--kv-channels"] == 256
    m = parse_args(
        export_megatron(
            _plan(
                "mixtral-8x7b",
                **{"parallelism.ep": 2, "parallelism.dp": 4, "stack.name": "megatron_core"},
            )
        ).text
    )[0]
    assert (m["--num-experts"], m["--moe-router-topk"], m["--expert-model-parallel-size"]) == (
        8,
        2,
        2,
    )
    d = parse_args(export_megatron(_plan("deepseek-v2-lite")).text)[0]
    assert d["--multi-latent-attention"] is True and d["--kv-lora-rank"] == 512


def test_megatron_uneven_pipeline() -> None:
    two = _plan(
        **{"parallelism.pp": 2, "parallelism.dp": 4, "parallelism.pp_layer_split": [12, 20]}
    )
    a = parse_args(export_megatron(two).text)[0]
    assert (a["--decoder-first-pipeline-num-layers"], a["--decoder-last-pipeline-num-layers"]) == (
        12,
        20,
    )
    four = _plan(
        **{"parallelism.pp": 4, "parallelism.dp": 2, "parallelism.pp_layer_split": [6, 8, 10, 8]}
    )
    layout = parse_args(export_megatron(four).text)[0]["--pipeline-model-parallel-layout"]
    assert layout == "E" + "t" * 6 + "|" + "t" * 8 + "|" + "t" * 10 + "|" + "t" * 8 + "L"


def test_lora_plans_get_a_peft_snippet() -> None:
    plan = _plan(**{"method.kind": "qlora"})
    for fmt in FORMATS:
        (snippet,) = [e for e in FORMATS[fmt].export(plan).extras if e.filename == "peft_config.py"]
        assert "LoraConfig(" in snippet.text and "BitsAndBytesConfig(" in snippet.text
        assert "'q_proj', 'k_proj', 'v_proj', 'o_proj'" in snippet.text


@pytest.mark.parametrize(
    ("fmt", "module"), [("megatron", "megatron"), ("torchtitan", "torchtitan")]
)
def test_check_names_the_missing_package(fmt: str, module: str) -> None:
    """Where the framework is not installed the check says what to install, and does not
    count as a refusal."""
    import importlib.util

    from engine.exports.check import PACKAGES, check_export

    if importlib.util.find_spec(module) is not None:  # pragma: no cover - installed here
        pytest.skip(f"{module} is installed")
    plan = _plan()
    (result,) = check_export(FORMATS[fmt].export(plan), plan)
    assert not result.available and not result.ok
    assert result.message == f"install {PACKAGES[fmt]} to check this file"
