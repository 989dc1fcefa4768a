"""The shapes real configs come in (issue 39), each on a small hand-made file whose
expected plan is derived here from the framework's own rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.estimate import estimate
from engine.exports import FORMATS
from engine.exports.common import Imported
from engine.exports.import_guard import ImportRefused
from engine.exports.importers import import_file
from engine.exports.megatron import megatron_args
from engine.legality.checks import plan_problems
from engine.plan import with_values
from engine.presets import default_plan


def _import(tmp_path: Path, name: str, text: str, function: str = "") -> Imported:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return import_file(f"{path}::{function}" if function else path, default_plan())


MEGATRON = """#!/bin/bash
TP=${TP:-2}
NODES=2
WORLD=$((8*NODES))
MODEL_ARGS="--num-layers 4 --hidden-size 256
    --num-attention-heads 8 --seq-length 1024"
TRAIN_ARGS=(
    --micro-batch-size 2   # per rank
    --global-batch-size 64
    --bf16
)
torchrun --nproc_per_node 8 --nnodes $NODES pretrain_gpt.py $MODEL_ARGS "${TRAIN_ARGS[@]}" \\
    --tensor-model-parallel-size $TP --tokenizer-type GPT2BPETokenizer \\
    --recompute-activations --use-rotary-position-embeddings
"""


def test_megatron_script_with_arrays_a_quoted_string_and_defaults(tmp_path: Path) -> None:
    got = _import(tmp_path, "train_tiny.sh", MEGATRON)
    p = got.plan
    a = p.model.architecture
    # world = 8 per node × 2 nodes = 16; DP = 16 ÷ TP 2 = 8; GA = 64 ÷ (micro 2 × DP 8) = 4
    assert (p.parallelism.tp, p.parallelism.dp, p.batch.grad_accum) == (2, 8, 4)
    assert (a.layers, a.hidden, a.heads, p.batch.seq_len, p.batch.micro_batch) == (
        4,
        256,
        8,
        1024,
        2,
    )
    # GPT-2's 50,257 padded up to a multiple of 128 × TP 2 = 256: 197 × 256 = 50,432
    assert a.vocab == 50_432
    assert p.method.recompute.policy == "selective"  # --recompute-activations
    assert a.position == "rotary"
    assert p.model.name == "train_tiny" and p.model.preset is None
    assert "TP=2 (its default) (the script's own assignment)" in got.resolutions
    assert "WORLD=16 (the script's own assignment)" not in got.resolutions  # not used
    assert got.warnings == ()
    assert plan_problems(p) == []


def test_megatron_world_smaller_than_tp_times_pp_is_refused(tmp_path: Path) -> None:
    text = "torchrun --nproc_per_node 4 pretrain_gpt.py --tensor-model-parallel-size 8\n"
    with pytest.raises(ImportRefused, match="world of 4 GPUs does not hold TP 8 × PP 1"):
        _import(tmp_path, "big.sh", text)


def test_megatron_vocabulary_never_silently_the_plans(tmp_path: Path) -> None:
    got = _import(tmp_path, "bare.sh", "python pretrain_gpt.py --num-layers 2\n")
    assert any(w.startswith("no --vocab-size and no tokenizer of known size") for w in got.warnings)


TITAN = (
    "torchrun --nnodes 2 --nproc_per_node 8 -m torchtitan.train "
    "--module torchtitan.models.llama3.config_registry --config llama3_70b "
    "--parallelism.tensor_parallel_degree=8 --training.local_batch_size 2 "
    "--training.seq_len 4096 --compile.enable\n"
)


def test_torchtitan_command_line_world_overrides_and_bare_flags(tmp_path: Path) -> None:
    p = _import(tmp_path, "run.txt", TITAN).plan
    # data_parallel_shard_degree -1: 16 GPUs ÷ (replicate 1 · cp 1 · tp 8 · pp 1) = 2
    assert (p.parallelism.strategy, p.parallelism.dp, p.parallelism.tp) == ("fsdp2", 2, 8)
    assert p.model.preset == "llama-3.1-70b"
    assert (p.batch.micro_batch, p.batch.seq_len) == (2, 4096)
    assert p.workload.torch_compile is True  # the bare --compile.enable


RECIPES = """
from torchtitan.models.llama3 import model_registry


def small() -> Trainer.Config:
    spec = model_registry("8B")
    return Trainer.Config(
        model_spec=spec,
        training=TrainingConfig(num_tokens_per_microbatch_per_dp_rank=2 * 8192,
                                max_context_length=8192),
        parallelism=ParallelismConfig(tensor_parallel_degree=2),
        activation_checkpoint=FullAC.Config(),
    )


def other() -> Trainer.Config:
    config = small()
    config.parallelism.tensor_parallel_degree = 4
    return config
"""


def test_torchtitan_recipe_reads_only_the_named_function(tmp_path: Path) -> None:
    with pytest.raises(ImportRefused, match="holds 2 recipe functions .* as FILE::function"):
        _import(tmp_path, "reg.py", RECIPES)
    p = _import(tmp_path, "reg.py", RECIPES, "small").plan
    # 2 × 8192 tokens per micro-batch ÷ 8192 context = micro-batch 2; 8 ÷ TP 2 = 4 shards
    assert (p.batch.micro_batch, p.parallelism.tp, p.parallelism.dp) == (2, 2, 4)
    assert p.method.recompute.policy == "full"
    assert p.model.preset == "llama-3.1-8b"  # llama3's model_registry("8B")
    q = _import(tmp_path, "reg.py", RECIPES, "other").plan  # starts from small()
    assert (q.parallelism.tp, q.parallelism.dp, q.batch.micro_batch) == (4, 2, 2)


def test_deepspeed_pydantic_names_and_notes(tmp_path: Path) -> None:
    cfg = {
        "_comment": "ZeRO-3",
        "comms_config": {"verbose": False},
        "train_micro_batch_size_per_gpu": 1,
        "zero_optimization": {
            "stage": 3,
            "max_live_parameters": 3_000_000_000,
            "prefetch_bucket_size": 20_000_000,
            "param_persistence_threshold": 1000,
            "sub_group_size": 100_000_000,
            "offload_param": {"device": "cpu"},
        },
    }
    got = _import(tmp_path, "ds.json", json.dumps(cfg))
    k = got.plan.parallelism.knobs
    assert (k.ds_max_live_parameters, k.ds_prefetch_bucket_elements) == (3e9, 2e7)
    assert k.ds_param_persistence_threshold == 1000
    assert got.plan.offload.sub_group_size == 100_000_000
    assert (got.plan.offload.params, got.plan.offload.optimizer) == ("cpu", "none")
    assert got.warnings == ()  # _comment and comms_config change no memory
    assert plan_problems(got.plan) == []  # DeepSpeed runs parameter-only offload


def test_deepspeed_stage_zero_is_ddp(tmp_path: Path) -> None:
    got = _import(tmp_path, "z0.json", '{"zero_optimization": {"stage": 0}}')
    assert got.plan.parallelism.strategy == "ddp" and plan_problems(got.plan) == []


@pytest.mark.parametrize(
    ("value", "strategy"),
    [
        ("SHARD_GRAD_OP", "fsdp1_shard_grad_op"),
        ("2", "fsdp1_shard_grad_op"),
        ("NO_SHARD", "fsdp1_no_shard"),
        ("HYBRID_SHARD", "fsdp1_hybrid_shard"),
        ("FULL_SHARD", "fsdp1_full_shard"),
    ],
)
def test_accelerate_fsdp1_reshard_after_forward(tmp_path: Path, value: str, strategy: str) -> None:
    yaml = (
        "distributed_type: FSDP\nnum_processes: 8\nfsdp_config:\n  fsdp_version: 1\n"
        f"  fsdp_reshard_after_forward: {value}\n"
    )
    assert _import(tmp_path, "a.yaml", yaml).plan.parallelism.strategy == strategy


def test_accelerate_fsdp1_bool_is_refused_as_accelerate_does(tmp_path: Path) -> None:
    yaml = "distributed_type: FSDP\nfsdp_config:\n  fsdp_reshard_after_forward: true\n"
    with pytest.raises(ImportRefused, match="which accelerate refuses with fsdp_version 1"):
        _import(tmp_path, "a.yaml", yaml)


def test_accelerate_no_distribution_is_one_rank(tmp_path: Path) -> None:
    got = _import(tmp_path, "a.yaml", "distributed_type: 'NO'\nmixed_precision: bf16\n")
    assert got.plan.parallelism.dp == 1


def test_a_yaml_that_is_not_accelerates_says_so(tmp_path: Path) -> None:
    yaml = "base_model: meta-llama/Llama-3.1-8B\ndatasets:\n  - path: x\n    type: alpaca\n"
    with pytest.raises(ImportRefused, match="it is YAML but not an accelerate config"):
        _import(tmp_path, "axolotl.yaml", yaml)


def test_ds_config_export_fills_the_optimizer_params() -> None:
    hf = with_values(default_plan(), {"stack.name": "hf_trainer", "parallelism.strategy": "zero2"})
    params = json.loads(FORMATS["deepspeed"].export(hf).text)["optimizer"]["params"]
    assert {k: params[k] for k in ("lr", "betas", "eps", "weight_decay")} == dict.fromkeys(
        ("lr", "betas", "eps", "weight_decay"), "auto"
    )
    ds = with_values(hf, {"stack.name": "deepspeed"})
    exp = FORMATS["deepspeed"].export(ds)
    params = json.loads(exp.text)["optimizer"]["params"]
    assert params["betas"] == [0.9, 0.999] and params["eps"] == 1e-8
    assert any("optimizer.params.lr" in a for a in exp.advice)


def test_megatron_export_writes_no_fp16_main_grads_and_no_offload_without_distopt() -> None:
    fp16 = with_values(
        default_plan(),
        {
            "stack.name": "megatron_core",
            "parallelism.strategy": "megatron_distopt",
            "method.precision.policy": "amp_master",
            "method.precision.compute_dtype": "fp16",
            "method.precision.grad_dtype": "fp16",
            "method.optimizer.precision_aware": True,
        },
    )
    args, gaps = megatron_args(fp16)
    assert "--main-grads-dtype" not in args
    assert "method.precision.grad_dtype" in {g.field for g in gaps()}
    zero = with_values(
        default_plan(), {"parallelism.strategy": "zero2", "offload.optimizer": "cpu"}
    )
    args, gaps = megatron_args(zero)
    assert "--optimizer-cpu-offload" not in args
    assert "offload.optimizer" in {g.field for g in gaps()}


@pytest.mark.parametrize("kind", ["lora", "qlora"])
def test_lora_under_accelerate_fsdp_one_estimate_both_ways(tmp_path: Path, kind: str) -> None:
    """accelerate's FSDP upcasts only trainable parameters (peft's adapters are already
    fp32), so the export lists no precision gap and the import keeps the stack's policy:
    the plan, its accelerate YAML and the YAML imported over it give one estimate."""
    plan = with_values(
        default_plan(),
        {"stack.name": "hf_trainer", "method.kind": kind, "parallelism.strategy": "fsdp2"},
    )
    exp = FORMATS["accelerate"].export(plan)
    assert "method.precision.policy" not in {u.field for u in exp.unexpressed}
    path = tmp_path / exp.filename
    path.write_text(exp.text, encoding="utf-8")
    back = import_file(path, plan).plan
    assert estimate(back).fit_peak == estimate(plan).fit_peak


def test_torchtitan_job_config_file_is_named_not_silently_skipped(tmp_path: Path) -> None:
    text = "torchrun --nproc_per_node 8 -m torchtitan.train --job.config-file llama3_8b.toml\n"
    with pytest.raises(ImportRefused, match="settings are in --job.config-file 'llama3_8b.toml'"):
        _import(tmp_path, "run.sh", text)
    got = _import(tmp_path, "run.sh", text.replace("\n", " --training.seq_len 1024\n"))
    assert got.warnings[0].startswith("--job.config-file 'llama3_8b.toml' is not read from here")


def test_parameter_only_offload_keeps_the_gradient_partition_in_hbm() -> None:
    """DeepSpeed stage3.py moves the gradient partition to the host only ``if
    self.offload_optimizer``: offloading parameters alone moves the 16-bit weights, and
    the gradient and optimizer rows stay where they were."""
    base = with_values(default_plan(), {"parallelism.strategy": "zero3"})

    def rows(params: str) -> dict[str, int]:
        e = estimate(with_values(base, {"offload.params": params}))
        return {r.id: r.high for r in e.heaviest.rows}

    kept, moved = rows("none"), rows("cpu")
    assert "hbm.weights" in kept and "hbm.weights" not in moved
    assert moved["hbm.grads"] == kept["hbm.grads"]
    assert moved["hbm.optimizer.exp_avg"] == kept["hbm.optimizer.exp_avg"]


def test_torchtitan_qwen3_32b_flavor_has_the_tables_dims() -> None:
    """torchtitan models/qwen3/__init__.py ``_32b``: dim 5120, 64 layers, 64 heads and 8
    KV heads of 128, FFN 25,600, vocabulary 151,936, untied. Per layer: q 5120·8192 +
    k,v 2·5120·1024 + o 8192·5120 + MLP 3·5120·25600 + norms 2·5120 + QK-norms 2·128
    = 487,598,336; embeddings and head 2·151,936·5120 + final norm 5120 = 1,555,829,760;
    total 64 · 487,598,336 + 1,555,829,760 = 32,762,123,264 (Qwen3-32B's 32.8 B)."""
    from engine.exports.titan_cli import derived_model
    from engine.models.summary import summarize

    model = derived_model("qwen3", "32B")
    assert model is not None
    assert summarize(model.architecture).total == 64 * 487_598_336 + 1_555_829_760


GRID = {
    "deepspeed": [
        {"stack.name": "hf_trainer", "parallelism.strategy": "zero2"},
        {"stack.name": "hf_trainer", "parallelism.strategy": "zero3", "offload.params": "cpu"},
        {
            "stack.name": "deepspeed",
            "parallelism.strategy": "zero3",
            "offload.optimizer": "cpu",
            "offload.params": "cpu",
        },
    ],
    "accelerate": [
        {
            "stack.name": "hf_trainer",
            "parallelism.strategy": "zero3",
            "method.precision.compute_dtype": "fp16",
            "method.precision.loss_scaling": True,
        },
        {"stack.name": "hf_trainer", "parallelism.strategy": "fsdp1_shard_grad_op"},
        {
            "stack.name": "hf_trainer",
            "parallelism.strategy": "fsdp2_hsdp",
            "parallelism.dp": 16,
            "parallelism.shard_group_size": 8,
        },
        {"stack.name": "hf_trainer", "method.kind": "lora", "parallelism.strategy": "fsdp2"},
        {
            "stack.name": "hf_trainer",
            "parallelism.strategy": "ddp",
            "method.precision.compute_dtype": "fp16",
        },
    ],
    "megatron": [
        {
            "stack.name": "megatron_core",
            "parallelism.strategy": "megatron_distopt",
            "parallelism.tp": 4,
            "parallelism.pp": 2,
            "parallelism.dp": 2,
            "parallelism.sequence_parallel": True,
        },
        {
            "stack.name": "megatron_core",
            "parallelism.strategy": "megatron_distopt",
            "method.precision.compute_dtype": "fp16",
            "method.precision.loss_scaling": True,
        },
    ],
    "torchtitan": [
        {
            "stack.name": "torchtitan",
            "parallelism.strategy": "fsdp2",
            "parallelism.tp": 2,
            "parallelism.dp": 4,
        },
        {
            "stack.name": "torchtitan",
            "parallelism.strategy": "fsdp2",
            "method.recompute.policy": "full",
        },
    ],
}


@pytest.mark.parametrize(("fmt", "changes"), [(f, c) for f, plans in GRID.items() for c in plans])
def test_a_grid_of_exports_reimports_to_the_same_estimate(
    tmp_path: Path, fmt: str, changes: dict[str, object]
) -> None:
    """Twelve varied plans (fp16, offload, HSDP, LoRA, TP × PP) in their own format read
    back to the same estimate (the fp16 DDP plan's accelerate gaps — loss scaling and
    the reduce dtype — are the HF Trainer's own choices, which the import reads back)."""
    plan = with_values(default_plan(), changes)
    exp = FORMATS[fmt].export(plan)
    for f in (exp, *exp.extras):
        (tmp_path / f.filename).write_text(f.text, encoding="utf-8")
    back = import_file(tmp_path / exp.filename, plan).plan
    assert estimate(back).fit_peak == estimate(plan).fit_peak
