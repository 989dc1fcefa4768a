"""The export grid of issue 39: varied plans, each a job its framework runs, that every
export must carry whole — re-imported to the same estimate (``test_export_grid``) and
accepted by the framework's own parser (``framework_parsers``, and the torchtitan part
of ``test_export_grid``).

One row per plan: (label, format, model preset, changes to the preset's default plan).
The grid spans ZeRO 0–3 with and without offload, FSDP1 and FSDP2, LoRA and QLoRA,
Megatron TP / PP / EP, fp16 and bf16, torchtitan with TP, CP and PP.
"""

from __future__ import annotations

from typing import Any

from engine.plan import Plan, default_plan, with_values
from engine.presets import model_section_for

GRID: list[tuple[str, str, str, dict[str, Any]]] = [
    (
        "ds-z0-fp16",
        "deepspeed",
        "llama-3.1-8b",
        {
            "stack.name": "hf_trainer",
            "parallelism.strategy": "ddp",
            "parallelism.dp": 8,
            "method.precision.policy": "amp_master",
            "method.precision.compute_dtype": "fp16",
        },
    ),
    (
        "ds-z1-bf16",
        "deepspeed",
        "qwen2.5-7b",
        {"stack.name": "deepspeed", "parallelism.strategy": "zero1", "parallelism.dp": 8},
    ),
    (
        "ds-z2-fp16-optcpu",
        "deepspeed",
        "llama-3.1-8b",
        {
            "stack.name": "deepspeed",
            "parallelism.strategy": "zero2",
            "parallelism.dp": 4,
            "batch.grad_accum": 4,
            "offload.optimizer": "cpu",
            "method.precision.compute_dtype": "fp16",
        },
    ),
    (
        "ds-z3-allcpu",
        "deepspeed",
        "llama-3.1-70b",
        {
            "stack.name": "deepspeed",
            "parallelism.strategy": "zero3",
            "parallelism.dp": 16,
            "offload.optimizer": "cpu",
            "offload.params": "cpu",
            "method.recompute.policy": "full",
        },
    ),
    (
        "ds-z3-nvme",
        "deepspeed",
        "llama-3.1-8b",
        {
            "stack.name": "deepspeed",
            "parallelism.strategy": "zero3",
            "parallelism.dp": 8,
            "offload.optimizer": "nvme",
            "offload.params": "nvme",
        },
    ),
    (
        "ds-lora-z2",
        "deepspeed",
        "qwen2.5-7b",
        {
            "stack.name": "hf_trainer",
            "method.kind": "lora",
            "parallelism.strategy": "zero2",
            "parallelism.dp": 4,
        },
    ),
    (
        "acc-fsdp1",
        "accelerate",
        "llama-3.1-8b",
        {
            "stack.name": "hf_trainer",
            "parallelism.strategy": "fsdp1_full_shard",
            "parallelism.dp": 8,
        },
    ),
    (
        "acc-fsdp2-fp16",
        "accelerate",
        "qwen2.5-7b",
        {
            "stack.name": "hf_trainer",
            "parallelism.strategy": "fsdp2",
            "parallelism.dp": 8,
            "method.precision.compute_dtype": "fp16",
            "method.precision.loss_scaling": True,
        },
    ),
    (
        "acc-z3-qlora",
        "accelerate",
        "llama-3.1-8b",
        {
            "stack.name": "hf_trainer",
            "method.kind": "qlora",
            "parallelism.strategy": "zero3",
            "parallelism.dp": 4,
        },
    ),
    (
        "mlm-tp2-pp2",
        "megatron",
        "llama-3.1-8b",
        {
            "stack.name": "megatron_core",
            "parallelism.strategy": "megatron_distopt",
            "parallelism.tp": 2,
            "parallelism.pp": 2,
            "parallelism.dp": 2,
            "parallelism.sequence_parallel": True,
            "batch.grad_accum": 8,
        },
    ),
    (
        "mlm-fp16-tp4",
        "megatron",
        "qwen2.5-7b",
        {
            "stack.name": "megatron_core",
            "parallelism.strategy": "ddp",
            "parallelism.tp": 4,
            "parallelism.dp": 2,
            "method.precision.compute_dtype": "fp16",
        },
    ),
    (
        "mlm-moe-ep2",
        "megatron",
        "mixtral-8x7b",
        {
            "stack.name": "megatron_core",
            "parallelism.strategy": "megatron_distopt",
            "parallelism.tp": 2,
            "parallelism.pp": 4,
            "parallelism.ep": 2,
            "parallelism.dp": 2,
            "method.recompute.policy": "selective",
        },
    ),
    (
        "titan-fsdp2-tp2",
        "torchtitan",
        "llama-3.1-8b",
        {
            "stack.name": "torchtitan",
            "parallelism.strategy": "fsdp2",
            "parallelism.tp": 2,
            "parallelism.dp": 4,
        },
    ),
    (
        "titan-cp2",
        "torchtitan",
        "llama-3.1-8b",
        {
            "stack.name": "torchtitan",
            "parallelism.strategy": "fsdp2",
            "parallelism.cp": 2,
            "parallelism.dp": 4,
            "method.recompute.policy": "full",
        },
    ),
    (
        "titan-pp2-hsdp",
        "torchtitan",
        "llama-3.1-70b",
        {
            "stack.name": "torchtitan",
            "parallelism.strategy": "fsdp2_hsdp",
            "parallelism.dp": 8,
            "parallelism.shard_group_size": 4,
            "parallelism.tp": 4,
            "parallelism.pp": 2,
            "batch.grad_accum": 8,
        },
    ),
]


def grid_plan(model: str, changes: dict[str, Any]) -> Plan:
    """The default plan on ``model`` with ``changes`` applied."""
    tree = default_plan().model_dump(mode="json")
    tree["model"] = model_section_for(model).model_dump(mode="json")
    return with_values(Plan.model_validate(tree), changes)
