"""Peak events: gathered units, buckets, optimizer temporaries, runtime rows, checkpoint.

Hand-derived on the default plan (Llama-3.1-8B, FSDP2 over 8, bf16 compute, s 4096):
- root unit unsharded in bf16: embedding 128256·4096·2 = 1,050,673,152 + lm_head the same
  + final norm 4096·2 = 8,192 → 2,101,354,496 B (the measured params_unsharded of the 8B
  case);
- one decoder layer gathered flat: 218,112,000 elements · 2 = 436,224,000 B (the
  measured all_gather);
- foreach AdamW temporaries: one fp32 copy of the rank's shard = 4,015,130,624 B.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.estimate import estimate
from engine.plan import Plan, default_plan, with_value, with_values
from engine.units import round_up


def rows(plan: Plan) -> dict[str, object]:
    return {r.id: r for r in estimate(plan).rows}


def _row(plan: Plan, id_: str):  # type: ignore[no-untyped-def]
    return next(r for r in estimate(plan).rows if r.id == id_)


def test_fsdp2_gathered_units_exact() -> None:
    plan = default_plan()
    assert _row(plan, "hbm.gathered.root").low == 2_101_354_496
    assert _row(plan, "hbm.gathered.all_gather_buffer").low == 436_224_000
    assert _row(plan, "hbm.gathered.layers").low == 436_224_000  # current unit in backward


def test_reshard_after_forward_false_keeps_every_unit() -> None:
    """32 layers × 436,224,000 B = 13,959,168,000 B live from forward to backward."""
    plan = with_value(default_plan(), "parallelism.knobs.fsdp_reshard_after_forward", False)
    r = _row(plan, "hbm.gathered.layers")
    assert r.low == 32 * 436_224_000 and "forward" in r.phases
    assert estimate(plan).peak.low > estimate(default_plan()).peak.low


def test_optimizer_temporaries_by_implementation() -> None:
    plan = default_plan()
    assert _row(plan, "hbm.optimizer_step.temporaries").low == 4_015_130_624
    fused = with_value(plan, "method.optimizer.implementation", "fused")
    assert "hbm.optimizer_step.temporaries" not in rows(fused)
    loop = with_value(plan, "method.optimizer.implementation", "for_loop")
    # largest shard: lm_head/embedding 16032·4096·4 = 262,668,288; 2× plus the previous
    # tensor (the embedding precedes... the final norm 512 B precedes lm_head):
    r = _row(loop, "hbm.optimizer_step.temporaries")
    assert 2 * 262_668_288 <= r.low <= 3 * 262_668_288


def test_ddp_buckets_copy_every_gradient() -> None:
    """DDP over 8 ranks without gradient_as_bucket_view: a flat copy of all grads (fp32,
    8,030,261,248 × 4 = 32,121,044,992 B) in 25 MiB buckets."""
    plan = with_values(default_plan(), {"parallelism.strategy": "ddp"})
    r = _row(plan, "hbm.buckets.ddp")
    assert r.low == 32_121_044_992
    assert r.phases == frozenset({"steady", "forward", "backward", "optimizer", "checkpoint"})


def test_zero3_gathered_range_follows_knobs() -> None:
    plan = with_value(default_plan(), "parallelism.strategy", "zero3")
    r = _row(plan, "hbm.gathered.layers")
    assert r.low == 436_224_000  # one layer, bf16
    assert r.high == round_up((218_112_000 + 50_000_000) * 2, 512)
    capped = with_value(plan, "parallelism.knobs.ds_max_live_parameters", 218_112_000)
    assert _row(capped, "hbm.gathered.layers").high == 436_224_000


def test_runtime_rows_are_outside_allocated() -> None:
    """One DP communicator (8 ranks) on H100: 0.5–2.0 GB (Hopper band, NVIDIA/nccl #864,
    #986). Reserved follows the allocator model (engine/allocator/reserve.py): the steady
    (persistent) part is 4 states × 4,015,130,624 B + 148,992 (step) + 65,536 (batch) +
    1,024 (rotary) + 2 × 33,554,432 (the forward's and backward's cuBLAS workspaces on
    Hopper, allocated through the caching allocator: CublasHandlePool.cpp
    setWorkspaceForHandle) = 12,112,716,288 B and carries no reserve; the transient part
    at the backward.start peak is 46,888,676,454 − 12,112,716,288 = 34,775,960,166 B (low)
    and 48,731,391,488 − 12,112,716,288 = 36,618,675,200 B (high), × 0.05–0.09
    fragmentation; FSDP2's side streams (engine/allocator/fsdp2_pools.py, torch
    ``_fsdp_collectives.py``) add 1.55–1.74 × the all-gather stream's working set — the
    root unit's all-gather output beside one layer unit's, 2,101,354,496 + 436,224,000 =
    2,537,578,496 B — and, at the loss's backward, before any reduce-scatter, the
    reduce-scatter stream's pool of the sharded fp32 gradients
    ``zero_grad(set_to_none=True)`` freed, 4,015,130,624 B (the unsharded units, the
    reduce-scatter input and the root's gradients are compute-stream blocks: in the
    transient). The device peak adds CUDA context and NCCL."""
    est = estimate(default_plan())
    nccl = _row(default_plan(), "hbm.runtime.nccl")
    assert (nccl.low, nccl.high) == (500_000_000, 2_000_000_000)
    h = est.heaviest
    assert h.totals.steady == (12_112_716_288, 12_112_716_288)
    assert h.totals.side == 4_896_931_840  # the gathered and bucket rows, as before
    ag, rs = 2_537_578_496, 4_015_130_624
    low = 46_888_676_454 + int(34_775_960_166 * 0.05) + int(ag * 1.55) + rs
    high = 48_731_391_488 + int(36_618_675_200 * 0.09) + int(ag * 1.74) + rs
    assert (h.reserved_peak.low, h.reserved_peak.high) == (low, high)
    assert h.device_peak.low > h.reserved_peak.low
    # the fit adds only the fragmentation a free-and-retry cannot release, not the
    # side-stream caches: allocated (cuBLAS workspaces in it) + 0.05–0.09 × transient +
    # NCCL (the CUDA context is already taken from the framework-visible capacity)
    stuck = (int(34_775_960_166 * 0.05), int(36_618_675_200 * 0.09))
    assert est.fit_peak.low == 46_888_676_454 + stuck[0] + 500_000_000
    assert est.fit_peak.high == 48_731_391_488 + stuck[1] + 2_000_000_000
    pessimistic = with_value(default_plan(), "runtime.reserve_model", "fraction")
    p = estimate(pessimistic).heaviest
    assert p.reserved_peak.high == p.peak.high + int(p.peak.high * 0.36)
    tp = with_values(default_plan(), {"parallelism.tp": 2, "parallelism.dp": 4})
    assert "TP (2)" in _row(tp, "hbm.runtime.nccl").formula


def test_consolidated_checkpoint_on_gpu() -> None:
    """Full state on rank 0's GPU: the whole checkpoint — 8,030,261,248 × (4 fp32 params +
    2 × 4 Adam) B = 96,363,134,976 B, plus 291 step counters × 4 B = 1,164 B, plus RNG and
    scheduler state of 8 ranks × 8 KiB = 65,536 B → 96,363,201,676 B."""
    plan = with_values(
        default_plan(), {"checkpoint.format": "consolidated_rank0", "checkpoint.staging": "gpu"}
    )
    est = estimate(plan)
    assert _row(plan, "hbm.checkpoint.gathered").low == 8_030_261_248 * 12 + 1_164 + 65_536

    assert est.heaviest.peak_phase == "checkpoint"


def test_accumulation_without_sync_holds_unsharded_grads() -> None:
    plan = with_values(
        default_plan(),
        {"batch.grad_accum": 4, "parallelism.knobs.accumulate_without_sync": True},
    )
    r = _row(plan, "hbm.grads_unsharded.accumulation")
    assert r.low == 8_030_261_248 * 2
    synced = with_value(plan, "parallelism.knobs.accumulate_without_sync", False)
    assert estimate(synced).peak.high < estimate(plan).peak.high


def test_grads_live_in_forward_only_when_accumulating() -> None:
    one = estimate(default_plan()).heaviest.moments
    acc = estimate(with_value(default_plan(), "batch.grad_accum", 2)).heaviest.moments
    assert acc["forward"].low - one["forward"].low == 4_015_130_624


@settings(max_examples=15, deadline=None)
@given(dp=st.sampled_from([2, 4, 8, 16, 32]))
def test_more_shards_never_raise_gathered_or_persistent(dp: int) -> None:
    small = estimate(with_value(default_plan(), "parallelism.dp", dp))
    big = estimate(with_value(default_plan(), "parallelism.dp", dp * 2))
    assert big.heaviest.phases["steady"].high <= small.heaviest.phases["steady"].high
