"""Plans of the published runs the reserve is calibrated and judged on (the overrides of
``/work/shared/reference/published/dev.jsonl`` and the issue's runs), built exactly as
``memplan estimate --preset P --set k=v ...`` builds them."""

from __future__ import annotations

import json
from typing import Any

from engine.cli.common import apply_sets, with_model
from engine.plan import Plan, default_plan
from engine.validation.calibrate import Calibration, propose
from engine.validation.records import MeasuredRecord


def plan_of(preset: str, sets: dict[str, Any]) -> Plan:
    """The CLI's plan of ``--preset preset`` and one ``--set`` per item."""
    items = [f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in sets.items()]
    return apply_sets(with_model(default_plan(), preset), items)


def calibrated(plan: Plan, est: Any, allocated: int, reserved: int) -> Calibration:
    """What ``memplan calibrate`` proposes, at margin 0, from one record of this plan's
    peak ``allocated`` and ``reserved`` bytes (``est``: the plan's estimate)."""
    record = MeasuredRecord.model_validate(
        {
            "config_hash": plan.config_hash(),
            "world_size": est.world_size,
            "max_allocated_bytes": allocated,
            "max_reserved_bytes": reserved,
        }
    )
    return propose(plan, [record], est=est, margin=0.0)


TORCHTITAN_8B = {
    "stack.name": "torchtitan",
    "parallelism.strategy": "fsdp2",
    "parallelism.dp": 8,
    "batch.seq_len": 8192,
    "batch.micro_batch": 2,
    "hardware.accelerator": "h100-sxm-80gb",
    "hardware.hbm_bytes": 103079215104,
    "hardware.usable_policy": "custom",
    "hardware.usable_hbm_bytes": 102005473280,
    "runtime.loss_impl": "eager",
    "runtime.zero_grad": "set_to_none",
    # PR #165 (April 2024) ran torchtitan's 2024 code, before 0.2.0 (#1094): the whole
    # model is the root FSDP2 unit, one freqs_cis buffer, separate wq / wk / wv
    "runtime.torchtitan_version": "0.0.2",
}
"""dev.jsonl ``torchtitan-8b-fsdp8-sac``: Llama-3.1-8B, FSDP2 over 8 × H100 96 GB, with
torchtitan's 2024 step (plain cross-entropy, ``zero_grad()`` at torch's default
``set_to_none=True``: the chunked loss and ``set_to_none=False`` came later)."""

TORCHTITAN_PR165 = {
    "stack.name": "torchtitan",
    "parallelism.strategy": "fsdp2",
    "parallelism.dp": 8,
    "batch.seq_len": 2048,
    "batch.micro_batch": 8,
    "hardware.accelerator": "h100-sxm-80gb",
    "hardware.hbm_bytes": 103079215104,
    "hardware.usable_policy": "custom",
    "hardware.usable_hbm_bytes": 102005473280,
    "runtime.loss_impl": "eager",
    "runtime.logits_fp32_upcast": False,
    "runtime.kept_logits": "compute",
    "runtime.zero_grad": "set_to_none",
    "runtime.expandable_segments": False,
    "method.optimizer.implementation": "foreach",
    "runtime.torchtitan_version": "0.0.2",
    "runtime.framework_version": "torch 2.4",
}
"""The run torchtitan PR #165 measured (commit 83c879f18, 2024-03-28), as its code ran
it (preset llama-2-7b): ``train_configs/llama_7b.toml`` — model ``llama`` flavor 7B
(Llama-2 shapes, the Llama-2 tokenizer's 32,000 words), ``batch_size = 8``,
``seq_len = 2048``; ``train.py`` computes ``F.cross_entropy(pred.flatten(0, 1),
labels.flatten(0, 1))`` on the 16-bit ``pred`` (no fp32 upcast) and keeps ``pred``
bound through ``loss.backward()``; ``AdamW(..., foreach=True)``; ``optimizer.zero_grad()``
at torch's ``set_to_none=True``; ``run_llama_train.sh`` sets no ``PYTORCH_CUDA_ALLOC_CONF``
(``expandable_segments:True`` came with a5e57e4a9, 2024-10-22); the README: "install the
latest pytorch nightly" — at the end of March 2024 main's nightlies were 2.4.0.dev
builds (torch 2.3's release branch was cut that month); either way a torch whose FSDP2
(``torch.distributed._composable.fsdp``) made the reduce-scatter input on the
reduce-scatter stream (pytorch#129721 moved it, June 2024, torch 2.5)."""

MEGATRON_1_7B = {
    "model.preset": None,
    "model.name": "open-sci-ref 1.7B (Megatron GPT, tied)",
    "model.architecture.layers": 24,
    "model.architecture.kv_heads": 32,
    "model.architecture.vocab": 50432,
    "model.architecture.qk_norm": True,
    "model.architecture.max_position": 4096,
    "model.architecture.tied_embeddings": True,
    "stack.name": "megatron_core",
    "parallelism.strategy": "megatron_distopt",
    "parallelism.dp": 252,
    "batch.seq_len": 4096,
    "batch.micro_batch": 4,
    "method.recompute.policy": "selective",
    "runtime.attention": "flash_attn",
    "hardware.accelerator": "a100-sxm-80gb",
    "hardware.hbm_bytes": 68719476736,
    "hardware.usable_policy": "custom",
    "hardware.usable_hbm_bytes": 68182605824,
    "hardware.gpus_per_node": 4,
}
"""dev.jsonl ``megatron-1.7b-dp252-*`` (preset llama-3.2-1b)."""

PEFT_70B_LORA_ZERO3 = {
    "model.preset": None,
    "model.name": "Llama-2-70b-hf (+5 ChatML tokens, padded to 32008)",
    "model.architecture.vocab": 32008,
    "model.architecture.max_position": 4096,
    "stack.name": "hf_trainer",
    "method.kind": "lora",
    "method.lora.rank": 8,
    "method.lora.alpha": 16,
    "method.lora.targets": ["q", "k", "v", "o", "gate", "up", "down"],
    "parallelism.strategy": "zero3",
    "parallelism.dp": 8,
    "batch.seq_len": 2048,
    "batch.micro_batch": 8,
    "batch.grad_accum": 4,
    "method.recompute.policy": "full",
    "runtime.attention": "flash_attn",
    "hardware.accelerator": "h100-sxm-80gb",
}
"""dev.jsonl ``peft-llama2-70b-lora-zero3-8xh100`` (preset llama-3.1-70b)."""

LLAMA2_70B_FSDP_16 = {
    "model.preset": None,
    "model.name": "Llama-2-70b-hf",
    "model.architecture.vocab": 32000,
    "model.architecture.max_position": 4096,
    "stack.name": "hf_trainer",
    "parallelism.strategy": "fsdp1_full_shard",
    "parallelism.dp": 16,
    "batch.seq_len": 2048,
    "batch.micro_batch": 1,
    "method.recompute.policy": "full",
    "runtime.attention": "flash_attn",
    "hardware.accelerator": "a100-sxm-80gb",
}
"""Llama-2-70B full fine-tune, accelerate FSDP full shard on 2 nodes × 8 A100 80 GB, seq
2048, per-device batch 1, gradient checkpointing, flash attention, 500 steps (Hugging Face
blog "Fine-tuning Llama 2 70B using PyTorch FSDP", 2023; the issue's published run)."""

MISTRAL_7B_LORA_24GB = {
    "method.kind": "lora",
    "parallelism.dp": 1,
    "parallelism.strategy": "ddp",
    "hardware.accelerator": "rtx-4090-24gb",
    "method.recompute.policy": "full",
    "batch.seq_len": 4096,
}
"""Mistral-7B LoRA (bf16 base) with full recompute at sequence 4096 on one 24 GB card —
what the PEFT / QLoRA single-GPU recipes run (preset mistral-7b)."""

ANSWERAI_7B_LORA = {
    "stack.name": "pytorch",
    "parallelism.strategy": "fsdp1_full_shard",
    "parallelism.dp": 2,
    "method.precision.policy": "pure_16bit",
    "method.kind": "lora",
    "method.lora.rank": 64,
    "method.lora.alpha": 16,
    "method.lora.targets": ["q", "k", "v", "o", "gate", "up", "down"],
    "method.lora.adapter_dtype": "bf16",
    "method.recompute.policy": "full",
    "hardware.accelerator": "rtx-4090-24gb",
    "batch.micro_batch": 1,
}
"""Answer.AI fsdp_qlora ``train.py`` LoRA of Llama-2-7B, FSDP1 FULL_SHARD over 2 × RTX 3090
(benchmarks_03_2024.md; the published suite's ``answerai-llama2-7b-lora-*`` plan, preset
llama-2-7b); ``batch.seq_len`` set per run."""
