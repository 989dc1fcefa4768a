"""Rows true to the frameworks' code (issue 15, fixes A–L), each derived by hand from the
code path it follows. Reference: Llama-3.1-8B (P = 8,030,261,248), 8 × H100, s 4096."""

from __future__ import annotations

from typing import Any

from engine.estimate import Estimate, estimate
from engine.plan import Plan, default_plan, with_values

P = 8_030_261_248
"""Llama-3.1-8B parameters (its safetensors metadata)."""
SHARD = P // 8  # 1,003,782,656: the flat partition of 8 ranks (P is a multiple of 16)


def _plan(**changes: Any) -> Plan:
    return with_values(default_plan(), {k.replace("__", "."): v for k, v in changes.items()})


def _rows(est: Estimate) -> dict[str, int]:
    return {r.id: r.high for r in est.rows}


def test_a_deepspeed_bf16_casts_the_module_and_keeps_the_fp32_master() -> None:
    """A. DeepSpeed 0.19.6 runtime/engine.py ``_configure_distributed_model``: with
    ``bf16.enabled`` every floating parameter is cast to bf16
    (``_cast_module_mixed_precision``); zero/stage_1_and_2.py ``__init__`` keeps
    ``single_partition_of_fp32_groups``, the fp32 master of this rank's partition.

    ZeRO-2, 8 ranks: weights 2·P = 16,060,522,496 B (bf16, whole on every rank); master
    4·P/8 = 4,015,130,624 B. The module is bf16, so no autocast copies of the weights
    are saved for backward (no ``weight_casts`` row)."""
    rows = _rows(estimate(_plan(parallelism__strategy="zero2")))
    assert rows["hbm.weights"] == 2 * P == 16_060_522_496
    assert rows["hbm.master_weights"] == 4 * SHARD == 4_015_130_624
    assert "hbm.activations.saved.weight_casts" not in rows


def test_a_deepspeed_casts_peft_adapters_too() -> None:
    """A with peft on top: ``_cast_module_mixed_precision`` casts the fp32 LoRA adapters
    to bf16 as well; their fp32 copy is the ZeRO master. LoRA r 16 on q, k, v, o of
    8B: 32 layers × 16·((4096+4096)·2 + (4096+1024)·2) = 13,631,488 adapter
    parameters, bf16 whole under ZeRO-2 = 27,262,976 B."""
    rows = _rows(estimate(_plan(parallelism__strategy="zero2", method__kind="lora")))
    assert rows["hbm.weights.adapters"] == 2 * 13_631_488 == 27_262_976


def test_b_deepspeed_gradients_follow_the_model_dtype() -> None:
    """B. DeepSpeed 0.19.6 runtime/engine.py ``get_data_types``: ``grad_accum_dtype``
    is the model dtype (bf16) unless ``data_types.grad_accum_dtype`` is set, and
    ``_do_optimizer_sanity_check`` then picks the ZeRO optimizer (not BF16_Optimizer).

    ZeRO-1 keeps every rank's full 16-bit gradients until the boundary's reduce:
    2·P = 16,060,522,496 B (was 4·P in fp32). ZeRO-2 keeps its bf16 partition
    (stage_1_and_2.py ``copy_grads_in_partition``): 2·P/8 = 2,007,565,312 B."""
    zero1 = _rows(estimate(_plan(parallelism__strategy="zero1")))
    assert zero1["hbm.grads"] == 2 * P == 16_060_522_496
    zero2 = _rows(estimate(_plan(parallelism__strategy="zero2")))
    assert zero2["hbm.grads"] == 2 * SHARD == 2_007_565_312
    fp32 = _rows(
        estimate(_plan(parallelism__strategy="zero1", method__precision__grad_dtype="fp32"))
    )
    assert fp32["hbm.grads"] == 4 * P  # data_types.grad_accum_dtype fp32, as set


def test_c_zero12_buckets_follow_setup_buckets() -> None:
    """C. DeepSpeed 0.19.6 stage_1_and_2.py ``setup_buckets``: one
    ``reduce_bucket_size`` buffer (5e8 elements, runtime/zero/config.py) in the model
    dtype, a second only with ``overlap_comm`` (False for stages 1–2); the all-gather
    writes into the flat buffer; ``_release_ipg_buffers`` frees them at the end of
    backward. ZeRO-2: 5e8 × 2 B = 1,000,000,000 B in backward only; with overlap_comm
    2,000,000,000 B. (Before: (reduce + all-gather) × dtype, up to ×4.5.)"""
    est = estimate(_plan(parallelism__strategy="zero2"))
    bucket = next(r for r in est.rows if r.id == "hbm.buckets.zero")
    assert (bucket.low, bucket.high) == (1_000_000_000, 1_000_000_000)
    assert bucket.phases == frozenset({"backward"})
    overlap = estimate(
        _plan(parallelism__strategy="zero1", parallelism__knobs__ds_overlap_comm=True)
    )
    assert _rows(overlap)["hbm.buckets.zero"] == 2_000_000_000


def test_c_zero12_step_builds_the_fp32_gradient_partition() -> None:
    """C (the step's side). stage_1_and_2.py ``step``: ``flatten(averaged_gradients)``
    (bf16, P/8 elements) and its ``.to(fp32)`` copy exist together before the bf16
    gradients are freed: 2·P/8 + 4·P/8 = 6,022,695,936 B in the optimizer phase."""
    est = estimate(_plan(parallelism__strategy="zero2"))
    row = next(r for r in est.rows if r.id == "hbm.optimizer_step.fp32_grad_partition")
    assert row.high == row.low == 6 * SHARD == 6_022_695_936
    assert row.phases == frozenset({"optimizer"})
