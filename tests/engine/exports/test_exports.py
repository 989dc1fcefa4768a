"""Exports use only documented keys, keep the batch consistent, and round-trip."""

from __future__ import annotations

import json
import tomllib

import pytest
from documented_keys import (
    ACCELERATE_DEEPSPEED,
    ACCELERATE_DISTRIBUTED,
    ACCELERATE_FSDP,
    ACCELERATE_TOP,
    DS_AIO,
    DS_OFFLOAD_DEVICES,
    DS_OFFLOAD_OPTIMIZER,
    DS_OFFLOAD_PARAM,
    DS_TOP,
    DS_ZERO,
    TITAN,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.cli import main
from engine.exports import EXPORTERS
from engine.exports.accelerate import export_accelerate
from engine.exports.deepspeed import ds_config
from engine.exports.fsdp2 import export_fsdp2
from engine.exports.importers import import_accelerate, import_deepspeed, read_flat_yaml
from engine.exports.megatron import export_megatron, parse_args
from engine.layout import gpu_counts
from engine.plan import Plan, default_plan, with_values

STRATEGIES = [
    "ddp",
    "zero1",
    "zero2",
    "zero3",
    "fsdp2",
    "fsdp1_full_shard",
    "fsdp1_shard_grad_op",
    "fsdp2_hsdp",
    "megatron_distopt",
]


def _plan(strategy: str, **extra: object) -> Plan:
    ch: dict[str, object] = {"parallelism.strategy": strategy}
    ch.update(extra)
    return with_values(default_plan(), ch)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("offload", ["none", "cpu", "nvme"])
def test_ds_config_keys_are_documented(strategy: str, offload: str) -> None:
    params = offload if strategy == "zero3" else "none"
    cfg, _ = ds_config(_plan(strategy, **{"offload.optimizer": offload, "offload.params": params}))
    assert set(cfg) <= DS_TOP
    z = cfg["zero_optimization"]
    assert set(z) <= DS_ZERO and z["stage"] in (0, 1, 2, 3)
    if "offload_optimizer" in z:
        assert set(z["offload_optimizer"]) <= DS_OFFLOAD_OPTIMIZER
        assert z["offload_optimizer"]["device"] in DS_OFFLOAD_DEVICES
    if "offload_param" in z:
        assert set(z["offload_param"]) <= DS_OFFLOAD_PARAM and z["stage"] == 3
    if "aio" in cfg:
        assert set(cfg["aio"]) <= DS_AIO
    assert ("offload_optimizer" in z) == (offload != "none")


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 16), st.integers(1, 16), st.sampled_from([1, 2, 4, 8, 16, 64]))
def test_ds_batch_keys_consistent(mb: int, ga: int, dp: int) -> None:
    """train_batch_size = micro × accumulation × DP (DeepSpeed asserts this equality)."""
    cfg, _ = ds_config(
        _plan("zero2", **{"batch.micro_batch": mb, "batch.grad_accum": ga, "parallelism.dp": dp})
    )
    assert cfg["train_batch_size"] == mb * ga * dp
    assert cfg["train_micro_batch_size_per_gpu"] == mb
    assert cfg["gradient_accumulation_steps"] == ga


def test_deepspeed_round_trip() -> None:
    """Export a ZeRO-2 plan (micro 2, accumulation 4, DP 16, optimizer on CPU, reduce
    bucket 2e8) and import it over the default plan: the shared fields come back."""
    src = _plan(
        "zero2",
        **{
            "batch.micro_batch": 2,
            "batch.grad_accum": 4,
            "parallelism.dp": 16,
            "offload.optimizer": "cpu",
            "parallelism.knobs.ds_reduce_bucket_elements": 200_000_000,
        },
    )
    text = EXPORTERS["deepspeed"](src).text
    got, _ = import_deepspeed(text, default_plan())
    assert got.batch.micro_batch == 2 and got.batch.grad_accum == 4
    assert got.parallelism.dp == 16 and got.parallelism.strategy == "zero2"
    assert got.offload.optimizer == "cpu"
    assert got.parallelism.knobs.ds_reduce_bucket_elements == 200_000_000
    assert got.method.precision.compute_dtype == "bf16"
    assert json.loads(text)["train_batch_size"] == 2 * 4 * 16


def test_deepspeed_import_reports_auto() -> None:
    text = json.dumps(
        {
            "train_batch_size": "auto",
            "train_micro_batch_size_per_gpu": "auto",
            "zero_optimization": {"stage": 3, "reduce_bucket_size": "auto"},
        }
    )
    got, notes = import_deepspeed(text, default_plan())
    assert got.parallelism.strategy == "zero3" and got.batch.micro_batch == 1
    assert any("'auto'" in n for n in notes)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_accelerate_keys_documented_and_round_trip(strategy: str) -> None:
    plan = _plan(strategy, **{"parallelism.dp": 16, "batch.grad_accum": 2})
    text = export_accelerate(plan).text
    cfg = read_flat_yaml(text)
    yaml = pytest.importorskip("yaml")
    assert yaml.safe_load(text) == cfg  # the subset we write is real YAML
    assert set(cfg) <= ACCELERATE_TOP
    assert cfg["distributed_type"] in ACCELERATE_DISTRIBUTED
    assert set(cfg.get("deepspeed_config", {})) <= ACCELERATE_DEEPSPEED
    assert set(cfg.get("fsdp_config", {})) <= ACCELERATE_FSDP
    assert cfg["num_processes"] == 16 and cfg["num_machines"] == 2
    got, _ = import_accelerate(text, default_plan())
    assert got.parallelism.dp == 16
    expect = {"fsdp2_hsdp": "fsdp2", "megatron_distopt": "ddp"}.get(strategy, strategy)
    assert got.parallelism.strategy == expect
    if strategy.startswith("zero"):
        assert got.batch.grad_accum == 2


def test_fsdp2_torchtitan_keys_and_degrees() -> None:
    """HSDP with a shard group of 8 over DP 32: replicate 4 × shard 8 = 32; TP 2, PP 2."""
    plan = _plan(
        "fsdp2_hsdp",
        **{
            "parallelism.dp": 32,
            "parallelism.shard_group_size": 8,
            "parallelism.tp": 2,
            "parallelism.pp": 2,
        },
    )
    cfg = tomllib.loads(export_fsdp2(plan).text)
    for section, keys in cfg.items():
        assert set(keys) <= TITAN[section]
    par = cfg["parallelism"]
    assert (par["data_parallel_replicate_degree"], par["data_parallel_shard_degree"]) == (4, 8)
    assert (par["tensor_parallel_degree"], par["pipeline_parallel_degree"]) == (2, 2)
    assert cfg["training"]["global_batch_size"] == 32 and cfg["training"]["seq_len"] == 4096


def test_megatron_round_trip() -> None:
    plan = _plan(
        "megatron_distopt",
        **{
            "parallelism.tp": 4,
            "parallelism.pp": 2,
            "parallelism.dp": 8,
            "batch.micro_batch": 2,
            "batch.grad_accum": 3,
            "method.recompute.policy": "full",
        },
    )
    a = parse_args(export_megatron(plan).text)
    assert a["--tensor-model-parallel-size"] == 4 and a["--pipeline-model-parallel-size"] == 2
    assert a["--micro-batch-size"] == 2 and a["--global-batch-size"] == 2 * 3 * 8
    assert a["--num-query-groups"] == 8 and a["--use-distributed-optimizer"] is True
    assert a["--recompute-granularity"] == "full" and a["--bf16"] is True


def test_cli_layouts_export_and_estimate(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "--format", "deepspeed"]) == 0
    assert json.loads(capsys.readouterr().out)["train_batch_size"] == 8
    assert main(["layouts", "--gpus", "4"]) == 0
    out = capsys.readouterr().out
    assert "10 legal and 0 rejected layouts of 4 GPUs" in out
    counts = gpu_counts(default_plan(), max_gpus=64)
    assert counts.arithmetic_min.gpus is not None
    assert main(["layouts", "--max-gpus", "64"]) == 0
    assert f"1. arithmetic minimum: {counts.arithmetic_min.gpus} GPUs" in (capsys.readouterr().out)
    assert main(["estimate"]) == 0
    out = capsys.readouterr().out
    assert "2. first legal layout (procurement): 8 GPUs" in out
    assert "3. validation range: 8" in out
