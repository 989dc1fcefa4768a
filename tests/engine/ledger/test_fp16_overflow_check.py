"""The fp16 loss scaler's overflow check in a DeepSpeed ZeRO step (source review R12),
derived by hand from DeepSpeed's code.

``check_grad_overflow`` is on for fp16 only (runtime/engine.py
``_configure_zero_optimizer``; bf16 reads ``bfloat16_config.check_grad_overflow``, off by
default), and the check runs at the start of ``step``, before the gradient norm and the
flatten, alone:

- ZeRO-1/2 (stage_1_and_2.py ``has_overflow_partitioned_grads_serial``) calls
  ``_has_inf_or_nan`` on each gradient piece of the partition: ``float_x = x.float()``
  (4 B), ``isnan`` and ``isinf`` (1 B each), ``logical_or`` (1 B) and ``.float()`` (4 B),
  all referenced until it returns — 11 B an element of the largest piece;
- ZeRO-3 (stage3.py ``has_overflow``) runs ``torch.isinf(grad_partitions_flat_buffer)
  .any()`` then ``isnan``: 1 B an element of the rank's partition.

Llama-3.1-8B: P = 8,030,261,248; its largest tensor is the 128,256 × 4,096 =
525,336,576-element embedding / lm_head. No allocation rounding.
"""

from __future__ import annotations

from typing import Any

from ledger_plans import make_plan

from engine.estimate import estimate
from engine.stacks.defaults import resolved

P_8B = 8_030_261_248
STEP = "hbm.optimizer_step.fp32_grad_partition"


def _step(**changes: Any) -> Any:
    plan = make_plan(runtime__allocation_granularity_bytes=1, **changes)
    return plan, {r.id: r for r in estimate(plan).rows}[STEP]


def test_zero2_fp16_check_is_eleven_bytes_of_the_largest_piece() -> None:
    """DP 16: the partition, 8,030,261,248 / 16 = 501,891,328 elements, is smaller than
    the embedding, so the largest piece is the whole partition. The check's
    11 · 501,891,328 = 5,520,804,608 B exceeds the norm's fp64 copy (8 ·) and the
    flatten + fp32 copy (6 ·); in bf16 the step keeps the norm's 4,015,130,624 B."""
    plan, row = _step(
        parallelism__strategy="zero2",
        parallelism__dp=16,
        method__precision__compute_dtype="fp16",
        method__precision__grad_dtype="fp16",
    )
    assert resolved(plan).method.precision.grad_dtype == "fp16"
    assert row.low == row.high == 11 * P_8B // 16 == 5_520_804_608
    _, bf16 = _step(parallelism__strategy="zero2", parallelism__dp=16)
    assert bf16.high == 8 * P_8B // 16 == 4_015_130_624


def test_zero2_fp16_check_at_dp8_cuts_at_the_embedding() -> None:
    """DP 8: the partition (1,003,782,656 el.) holds the whole embedding piece, 525,336,576
    elements: 11 · 525,336,576 = 5,778,702,336 B, below the flatten + fp32 copy
    6 · 1,003,782,656 = 6,022,695,936 B, which stays the step's temporary."""
    _, row = _step(
        parallelism__strategy="zero2",
        parallelism__dp=8,
        method__precision__compute_dtype="fp16",
        method__precision__grad_dtype="fp16",
    )
    assert 11 * 525_336_576 == 5_778_702_336 < 6 * P_8B // 8
    assert row.high == 6 * P_8B // 8 == 6_022_695_936


def test_zero3_fp16_check_is_one_byte_of_the_partition() -> None:
    """ZeRO-3 on DP 2 with sub_group_size 1e8: the step's fp16 + fp32 sub-group is
    1e8 · 6 = 600,000,000 B up to (1e8 + 262,668,288, half the embedding) · 6 =
    2,176,009,728 B; the ``isinf`` of the 4,015,130,624-element partition is
    4,015,130,624 B, so it is the moment's temporary at both ends."""
    _, row = _step(
        parallelism__strategy="zero3",
        parallelism__dp=2,
        offload__sub_group_size=100_000_000,
        method__precision__compute_dtype="fp16",
        method__precision__grad_dtype="fp16",
    )
    assert row.low == row.high == P_8B // 2 == 4_015_130_624
