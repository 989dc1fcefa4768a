"""Published model-state formulas: the ZeRO paper and Megatron's distributed optimizer."""

from __future__ import annotations

import pytest
from ledger_plans import make_plan, rows_of

from engine.estimate import estimate

P = 8_030_261_248  # Llama-3.1-8B; every tensor's numel divides by 1024 (see below)
N_TENSORS = 291

MIXED_FP16 = {
    "method__precision__policy": "amp_master",
    "method__precision__compute_dtype": "fp16",
    "method__precision__grad_dtype": "fp16",
    "method__precision__loss_scaling": True,
    "runtime__allocation_granularity_bytes": 1,
    "parallelism__knobs__ds_param_persistence_threshold": 0,
}


def _state_bytes(strategy: str, dp: int) -> tuple[int, int]:
    rows = rows_of(make_plan(parallelism__strategy=strategy, parallelism__dp=dp, **MIXED_FP16))
    step = rows["hbm.optimizer.step"]
    return sum(rows.values()) - step, step


@pytest.mark.parametrize("n", [1, 2, 4, 8, 16, 64, 256, 1024])
def test_zero_paper_model_states_per_device(n: int) -> None:
    """ZeRO paper §3/Fig. 1, mixed-precision Adam with K = 12: fp16 params 2 B, fp16
    grads 2 B, fp32 master + momentum + variance 12 B = 16 B/param.
    Per device: DDP 16P; Pos (ZeRO-1) 4P + 12P/N; Pos+g (ZeRO-2) 2P + 14P/N;
    Pos+g+p (ZeRO-3) 16P/N. P = 8,030,261,248 (Llama-3.1-8B); all of its tensors have
    numel divisible by 1024 (dims 4096, 1024, 14336, 128256 × 4096), so every shard is
    exact. Allocation rounding is off (granularity 1) and the persistence threshold 0.
    AdamW's step counters (4 B per allocation) are separate from K and checked apart:
    per tensor under DDP (291 × 4 B, the model's own tensors), one per flat buffer under
    ZeRO-1/2/3 (4 B).
    """
    ddp, ddp_step = _state_bytes("ddp", n)
    z1, z1_step = _state_bytes("zero1", n)
    z2, z2_step = _state_bytes("zero2", n)
    z3, z3_step = _state_bytes("zero3", n)
    assert ddp == 16 * P
    assert z1 == 4 * P + 12 * P // n
    assert z2 == 2 * P + 14 * P // n
    assert z3 == 16 * P // n
    assert ddp_step == N_TENSORS * 4
    assert z1_step == z2_step == z3_step == 4


@pytest.mark.parametrize("d", [1, 2, 8, 32, 128])
@pytest.mark.parametrize(
    ("compute", "grads", "replicated", "sharded"),
    [("fp16", "fp16", 4, 16), ("bf16", "fp32", 6, 12)],
)
def test_megatron_distributed_optimizer_table(
    d: int, compute: str, grads: str, replicated: int, sharded: int
) -> None:
    """Megatron-LM dist_optimizer.md, bytes per parameter with d data-parallel ranks:
    fp16 params / fp16 grads: 20 → 4 + 16/d (2 param + 2 grad replicated; fp32 main
    grad 4 + master 4 + Adam 8 sharded); bf16 params / fp32 main grads: 18 → 6 + 12/d
    (2 param + 4 grad replicated — fp32 main grads are not distributed — master 4 +
    Adam 8 sharded). The step counter sits in one flat buffer: 4 B. The fp32 main-grad
    shard is the table's at the step: a peak row live from the step to the next
    zero_grad (distrib_optimizer.py ``_copy_model_grads_to_main_grads``).
    """
    plan = make_plan(
        parallelism__strategy="megatron_distopt",
        parallelism__dp=d,
        method__precision__policy="amp_master",
        method__precision__compute_dtype=compute,
        method__precision__grad_dtype=grads,
        runtime__allocation_granularity_bytes=1,
    )
    rows = rows_of(plan)
    shard = [r.high for r in estimate(plan).rows if r.id == "hbm.optimizer.fp32_grad_shard"]
    step = rows.pop("hbm.optimizer.step")
    assert step == 4
    assert sum(rows.values()) + sum(shard) == replicated * P + sharded * P // d


def test_megatron_fp32_row_of_the_table() -> None:
    """fp32 params / fp32 grads: 16 → 8 + 8/d (params 4 + grads 4 replicated, Adam 8
    sharded, no master copy). d = 4."""
    rows = rows_of(
        make_plan(
            parallelism__strategy="megatron_distopt",
            parallelism__dp=4,
            method__precision__policy="fp32",
            method__precision__compute_dtype="fp32",
            runtime__allocation_granularity_bytes=1,
        )
    )
    rows.pop("hbm.optimizer.step")
    assert sum(rows.values()) == 8 * P + 8 * P // 4
