"""ZeRO-1's gradients at the optimizer step (source review R4), derived by hand from
DeepSpeed 0.19.6's code.

Llama-3.1-8B (the default plan): P = 8,030,261,248 parameters, bf16 gradients (the stack
default: DeepSpeed's ``engine.get_data_types`` gives the model dtype unless
``grad_accum_dtype`` is set), DP 4 (P / 4 = 2,007,565,312), full recompute so the
optimizer phase was the peak before the fix.
"""

from __future__ import annotations

from ledger_plans import make_plan

from engine.estimate import estimate
from engine.plan import Plan
from engine.stacks.defaults import resolved

P_8B = 8_030_261_248
GIB = 2**30


def _zero1(**changes: object) -> Plan:
    return make_plan(
        parallelism__strategy="zero1",
        parallelism__dp=4,
        method__recompute__policy="full",
        **changes,
    )


def test_zero1_step_holds_the_partition_not_the_full_gradients() -> None:
    """DeepSpeed ``runtime/engine.py`` ``allreduce_gradients`` runs the stage-1
    ``reduce_gradients`` inside ``engine.backward`` at the boundary;
    ``stage_1_and_2.py`` ``reduce_independent_p_g_buckets_and_remove_grads`` moves each
    gradient into the IPG bucket (its full storage freed), ``copy_grads_in_partition``
    keeps the rank's part in ``grads_in_partition`` and
    ``independent_gradient_partition_epilogue`` drops every ``param.grad``.

    So the full 2·P = 16,060,522,496 B of bf16 gradients are live at the end of backward
    only, and the step sees the 2·P/4 = 4,015,130,624 B partition. The optimizer moment
    is the states plus that partition plus the step's flatten (2·P/4) and fp32 copy
    (4·P/4): 4,015,130,624 + 4,015,130,624 + 8,030,261,248 = 16,060,522,496 B above the
    steady moment — 52.35 GiB in all, the source review's figure, + 2 × 32 MiB of cuBLAS
    workspaces on H100 (allocated through the caching allocator): 52.41 GiB."""
    plan = _zero1()
    assert resolved(plan).method.precision.grad_dtype == "bf16"
    est = estimate(plan)
    rows = {r.id: r for r in est.rows}
    full, part = rows["hbm.grads"], rows["hbm.grads.partition"]
    assert full.high == 2 * P_8B == 16_060_522_496
    assert full.moments == frozenset({"backward.end"})
    assert part.low == part.high == 2 * P_8B // 4 == 4_015_130_624
    assert part.moments == frozenset({"optimizer"})
    assert part.source == "deepspeed-zero1-partition"
    m = est.heaviest.moments
    assert m["optimizer"].high - m["steady"].high == 4_015_130_624 * 2 + 8_030_261_248
    assert round((m["optimizer"].high - 2 * 33_554_432) / GIB, 2) == 52.35
    assert round(m["optimizer"].high / GIB, 2) == 52.41


def test_zero1_peak_moves_to_the_reduce_at_the_end_of_backward() -> None:
    """The largest moment is now the boundary's reduce: the states, the full 2·P
    gradients and the 1e9-byte IPG bucket (``setup_buckets``: reduce_bucket_size, no
    second one without overlap_comm) on top of the steady states — 53.28 GiB in the
    review's count, plus what is left of the first layer's activations here. Before the
    fix the step held the full gradients: 63.57 GiB."""
    est = estimate(_zero1())
    m = est.heaviest.moments
    assert est.heaviest.peak_phase == "backward"
    assert m["backward.end"].high - m["steady"].high >= 2 * P_8B + 1_000_000_000
    assert 53.28 * GIB <= est.peak.high <= 55 * GIB


def test_zero1_gradients_accumulate_whole_between_boundaries() -> None:
    """With grad_accum 2 the reduce runs at the boundary only (``is_gradient_accumulation
    _boundary``): the full gradients are live through the second micro-batch's forward
    and backward, and the partition still only at the step."""
    rows = {r.id: r for r in estimate(_zero1(batch__grad_accum=2)).rows}
    assert rows["hbm.grads"].live_at("forward", True)
    assert not rows["hbm.grads"].live_at("optimizer", True)
    assert rows["hbm.grads.partition"].live_at("optimizer", True)


def test_zero1_offload_keeps_no_partition_on_the_gpu() -> None:
    """With ZeRO-Offload the reduced partition goes to the host's fp32 gradient
    partition (``async_accumulate_grad_in_cpu_via_gpu`` / ``copy_grads_in_partition``'s
    cpu_offload branch): no HBM partition row; the full 16-bit gradients stay."""
    rows = {r.id: r for r in estimate(_zero1(offload__optimizer="cpu")).rows}
    assert "hbm.grads.partition" not in rows
    assert rows["hbm.grads"].high == 2 * P_8B


def test_zero2_accumulation_holds_a_second_partition_in_backward() -> None:
    """R7. ``stage_1_and_2.py``: ``copy_grads_in_partition`` allocates
    ``grads_in_partition`` anew each micro-step, while ``averaged_gradients`` keeps the
    first micro-step's views (``independent_gradient_partition_epilogue``) until the
    step. At grad_accum 2 on DP 8 both bf16 partitions, 2·P/8 = 2,007,565,312 B each,
    are live through the second micro-step's layers' backward; at grad_accum 1, or with
    ZeRO-Offload (the partition is on the host), there is no second one."""
    plan = make_plan(parallelism__strategy="zero2", batch__grad_accum=2)
    est = estimate(plan)
    rows = {r.id: r for r in est.rows}
    nxt = rows["hbm.grads.next_partition"]
    assert nxt.high == rows["hbm.grads"].high == 2 * P_8B // 8 == 2_007_565_312
    assert nxt.moments == frozenset({"backward.layers", "backward.middle", "backward.end"})
    assert rows["hbm.grads"].live_at("backward.layers", True)
    for changes in ({"batch__grad_accum": 1}, {"offload__optimizer": "cpu"}):
        other = make_plan(parallelism__strategy="zero2", **{"batch__grad_accum": 2, **changes})
        assert "hbm.grads.next_partition" not in {r.id for r in estimate(other).rows}


def test_zero12_step_temporary_is_the_larger_of_the_norm_and_the_flatten() -> None:
    """R6. ``stage_1_and_2.py`` ``step`` computes ``scaled_global_norm`` first:
    ``get_grad_norm_direct`` runs ``torch.linalg.vector_norm(g.data.double())`` on each
    gradient piece of the partition, one at a time, before the flatten (2·P/N) and its
    fp32 copy (4·P/N) exist. The largest piece is the 128,256 × 4,096 = 525,336,576-element
    embedding / lm_head, cut to the partition when that is smaller:
    - DP 8: flatten + fp32 = 6 · 1,003,782,656 = 6,022,695,936 B > fp64 4,202,692,608 B;
    - DP 16: partition 501,891,328 el. < the embedding, so the piece is the whole
      partition: 8 · 501,891,328 = 4,015,130,624 B > 6 · 501,891,328 = 3,011,347,968 B."""
    for dp, want in ((8, 6 * P_8B // 8), (16, 8 * P_8B // 16)):
        plan = make_plan(parallelism__strategy="zero2", parallelism__dp=dp)
        rows = {r.id: r for r in estimate(plan).rows}
        assert rows["hbm.optimizer_step.fp32_grad_partition"].high == want
    assert 8 * P_8B // 16 == 4_015_130_624
