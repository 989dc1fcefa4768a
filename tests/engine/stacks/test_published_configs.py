"""Published-config regression table: for each training stack, one plan whose per-rank
model-state bytes are derived by hand from the framework's code, checked exactly.

Llama-3.1-8B: P = 8,030,261,248 in 291 tensors (embedding, 32 × 9, final norm, lm_head);
every dim 0 divides by 8, so an 8-way shard is exactly P/8 = 1,003,782,656 elements.
Every allocation is rounded up to 512 B (the CUDA caching allocator).
"""

from __future__ import annotations

from typing import Any

import pytest

from engine.estimate import estimate
from engine.plan import default_plan, with_values
from engine.stacks.catalog import STACKS
from engine.stacks.defaults import resolve_stack_defaults

P = 8_030_261_248
SHARD = P // 8
STEP = 512  # one float32 step tensor, rounded up to 512 B
STATES = {"weights", "master", "grads", "optimizer"}

# Llama-3.1-70B under Megatron-Core TP 8 × PP 4 × DP 2, stage 0: 20 decoder layers of
# (q 8192² + k, v 1024·8192 + o 8192² + gate, up, down 28672·8192) / 8 + 2 norms of 8192
# = 106,971,136 local parameters each, plus the vocab-parallel embedding
# 128,256/8 · 8,192 = 131,334,144: N = 2,270,756,864.
N70 = 20 * 106_971_136 + 131_334_144

TABLE: list[tuple[str, dict[str, Any], str, dict[str, int]]] = [
    (
        # torch 2.13 FSDP2 fully_shard per layer + root, MixedPrecisionPolicy over fp32
        # parameters (the measured default plan): fp32 shard of weights, grads and both
        # AdamW moments, 291 step tensors.
        "pytorch",
        {},
        "fsdp2",
        {
            "hbm.weights": 4 * SHARD,
            "hbm.grads": 4 * SHARD,
            "hbm.optimizer.exp_avg": 4 * SHARD,
            "hbm.optimizer.exp_avg_sq": 4 * SHARD,
            "hbm.optimizer.step": 291 * STEP,
        },
    ),
    (
        # torchtitan: the same FSDP2 fp32 states (mixed_precision_param bf16 casts for
        # compute only; mixed_precision_reduce fp32 keeps fp32 gradient shards); 0.3.0
        # builds one wqkv per layer (runtime.qkv_fusion auto → fused): 291 − 2 × 32 steps.
        "torchtitan",
        {"stack.name": "torchtitan"},
        "fsdp2",
        {
            "hbm.weights": 4 * SHARD,
            "hbm.grads": 4 * SHARD,
            "hbm.optimizer.exp_avg": 4 * SHARD,
            "hbm.optimizer.exp_avg_sq": 4 * SHARD,
            "hbm.optimizer.step": 227 * STEP,
        },
    ),
    (
        # DeepSpeed 0.19.6 ZeRO-2, bf16.enabled: bf16 module whole on every rank
        # (_cast_module_mixed_precision), one flat fp32 master partition
        # (single_partition_of_fp32_groups), the bf16 gradient partition
        # (copy_grads_in_partition), FusedAdam's two fp32 moments of the partition and
        # the wrapped optimizer's one step tensor: 2P + (4 + 2 + 8)·P/8 + 512 B.
        "deepspeed",
        {"parallelism.strategy": "zero2"},
        "zero2",
        {
            "hbm.weights": 2 * P,
            "hbm.master_weights": 4 * SHARD,
            "hbm.grads": 2 * SHARD,
            "hbm.optimizer.exp_avg": 4 * SHARD,
            "hbm.optimizer.exp_avg_sq": 4 * SHARD,
            "hbm.optimizer.step": STEP,
        },
    ),
    (
        # HF Trainer + peft LoRA r 16 on q, k, v, o, one GPU: the base loaded in bf16
        # (from_pretrained dtype='auto') and frozen; 13,631,488 fp32 adapter parameters
        # (autocast_adapter_dtype) with fp32 grads and AdamW moments, 4 adapters × 32
        # layers × 2 (A, B) = 256 step tensors.
        "hf_trainer",
        {"method.kind": "lora", "parallelism.strategy": "ddp", "parallelism.dp": 1},
        "ddp",
        {
            "hbm.weights.frozen": 2 * P,
            "hbm.weights.adapters": 4 * 13_631_488,
            "hbm.grads": 4 * 13_631_488,
            "hbm.optimizer.exp_avg": 4 * 13_631_488,
            "hbm.optimizer.exp_avg_sq": 4 * 13_631_488,
            "hbm.optimizer.step": 256 * STEP,
        },
    ),
    (
        # Megatron-Core --bf16 with the distributed optimizer, Llama-3.1-70B TP 8 × PP 4
        # × DP 2, stage 0: bf16 local parameters 2N, fp32 main grads 4N (the whole
        # grad buffer), fp32 master and two moments over DP: 4N/2 each (Megatron's
        # 6 + 12/d bytes per parameter), one step.
        "megatron_core",
        {
            "model.architecture": {
                "family": "llama",
                "hidden": 8192,
                "layers": 80,
                "heads": 64,
                "kv_heads": 8,
                "intermediate": 28672,
                "vocab": 128256,
                "max_position": 131072,
                "tied_embeddings": False,
            },
            "parallelism.strategy": "megatron_distopt",
            "parallelism.tp": 8,
            "parallelism.pp": 4,
            "parallelism.dp": 2,
        },
        "megatron_distopt",
        {
            "hbm.weights": 2 * N70,
            "hbm.grads": 4 * N70,
            "hbm.master_weights": 2 * N70,
            "hbm.optimizer.exp_avg": 2 * N70,
            "hbm.optimizer.exp_avg_sq": 2 * N70,
            "hbm.optimizer.step": STEP,
        },
    ),
]


@pytest.mark.parametrize(
    ("stack", "changes", "strategy", "expected"), TABLE, ids=[row[0] for row in TABLE]
)
def test_model_state_bytes_per_rank_are_the_frameworks(
    stack: str, changes: dict[str, Any], strategy: str, expected: dict[str, int]
) -> None:
    plan = with_values(default_plan(), changes)
    assert resolve_stack_defaults(plan).stack == stack
    assert plan.parallelism.strategy == strategy
    est = estimate(plan)
    rows = est.stages[0].rows
    states = {r.id: r.high for r in rows if r.state in STATES and r.kind == "persistent"}
    assert states == expected


def test_the_table_covers_every_stack() -> None:
    assert {row[0] for row in TABLE} == set(STACKS)
