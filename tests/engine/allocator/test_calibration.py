"""Calibration of the reserve model on published (allocated, reserved) pairs.

Each pair is one run's ``max_memory_allocated`` and ``max_memory_reserved``. The model
(:mod:`engine.allocator.reserve`) predicts reserved − allocated from the allocated peak,
its persistent part (the ledger's steady moment) and the gathered units and buckets (the
side-stream pools), both read from MemPlan's estimate of the run's plan; the published
allocated peak stands in for MemPlan's own (whose errors are the ledger's, not the
reserve's). Done when the measured gap lies inside the predicted band and the band is no
wider than 6 points of allocated.
"""

from __future__ import annotations

import pytest

from engine.allocator.reserve import reserved_extra
from engine.estimate import estimate
from engine.ledger.peaks.runtime import reserve_factors
from engine.stacks.defaults import resolved
from engine.units import GiB, MiB
from tests.engine.allocator.published import (
    ANSWERAI_7B_LORA,
    MEGATRON_1_7B,
    TORCHTITAN_8B,
    TORCHTITAN_PR165,
    calibrated,
    plan_of,
)

TITAN_CAPACITY = 95 * GiB
"""torchtitan logs memory as a percentage of the card's 95 GiB (H100 96 GB, PR #165)."""

START = (
    "the published peak is at the start of backward (the loss's or the first layer's), "
    "before any reduce-scatter: each layer's backward frees its saved tensors (full AC: "
    "its input, 8 x 2,048 x 4,096 x 2 = 134,217,728 B) and adds its fp32 sharded "
    "gradients (202,383,360 x 4 / 8 = 101,191,680 B), and in torch 2.4 the reduce-scatter "
    "input is freed when foreach_reduce_scatter returns, so the live bytes fall layer "
    "by layer; the reduce-scatter stream's pool is then free"
)

CASES = [
    # (id, preset, sets, allocated B, reserved B, evaluated at the start of backward)
    # Megatron-LM 1.7B (open-sci-ref, A100 64 GB): "max allocated: 50277.15625 | max
    # reserved: 53386.0" MB (2^20 B) — gap 6.18 % of allocated
    (
        "megatron-1.7b",
        "llama-3.2-1b",
        MEGATRON_1_7B,
        int(50_277.15625 * MiB),
        53_386 * MiB,
        False,
    ),
    # torchtitan PR #165, FSDP2 over 8 × H100, Llama-2-7B at b 8 × s 2048 (its code:
    # published.TORCHTITAN_PR165): full AC 23.92 % active, 32.64 % reserved of 95.04 GiB
    # — gap 8.29 GiB, 36.5 % of allocated; selective AC 52.13 % / 62.51 % — 19.9 %
    # (peak *active*, which also counts freed blocks awaiting another stream's event)
    (
        "torchtitan-full-ac",
        "llama-2-7b",
        {**TORCHTITAN_PR165, "method.recompute.policy": "full"},
        0.2392,
        0.3264,
        True,
    ),
    (
        "torchtitan-sac",
        "llama-2-7b",
        TORCHTITAN_PR165,
        0.5213,
        0.6251,
        True,
    ),
]


def _bytes(x: float) -> int:
    return int(x * TITAN_CAPACITY) if isinstance(x, float) else int(x)


@pytest.mark.parametrize(("case", "preset", "sets", "allocated", "reserved", "start"), CASES)
def test_the_measured_gap_is_inside_a_band_no_wider_than_6_points(
    case: str,
    preset: str,
    sets: dict[str, object],
    allocated: float,
    reserved: float,
    start: bool,
) -> None:
    """The band at the measured peak: for the FSDP2 runs at the start of backward
    (:data:`START`), where the reserve model counts its streams' pools as free."""
    plan = resolved(plan_of(preset, sets))
    st = estimate(plan).heaviest.totals
    alloc, res = _bytes(allocated), _bytes(reserved)
    at = (alloc, alloc) if start else None
    low, high = reserved_extra(reserve_factors(plan), alloc, alloc, st.steady, st.side, at)
    pts = (100 * low / alloc, 100 * high / alloc)
    measured = 100 * (res - alloc) / alloc
    assert pts[0] <= measured <= pts[1], (case, pts, measured)
    assert pts[1] - pts[0] <= 6.0, (case, pts)


def test_the_pr165_full_ac_band_term_by_term() -> None:
    """The full-AC pair's band, hand-derived. Allocated: 0.2392 × 95 GiB (102,005,473,280
    B) = 24,399,709,208 B; the steady part 10,177,240,576–10,179,337,728 B; at the start
    of backward the pools are free: the all-gather stream's 929,062,912 B (root + one
    layer unit) × 1.55–1.74, the sharded fp32 gradients 3,369,207,808 B, the root's fp32
    reduce-scatter input 1,048,592,384 B and two layers' (809,533,440 B each): the one the
    next layer reuses and one pending under recordStream at both ends
    (fsdp2_pools ``RS_PENDING_RECORD_STREAM``: the host of a GPU-bound backward is a layer
    ahead when the next input is requested). Low: int(0.05 × 14,222,468,632) = 711,123,431
    + int(1.55 × 929,062,912) = 1,440,047,513 + 3,369,207,808 + 1,619,066,880 +
    1,048,592,384 = 8,188,038,016 B (33.56 %); high: int(0.09 × 14,220,371,480) =
    1,279,833,433 + int(1.74 × 929,062,912) = 1,616,569,466 + the same pools =
    8,933,269,971 B (36.61 %): 3.05 points wide, the measured 36.45 % inside. Without the
    pending block (0 at the low end, as before) the band was 6.37 points wide; with two
    pending at both ends its low end, 8,997,571,456 B (36.88 %), would be above the
    measured gap: the pair rules out a host two layers ahead, not one."""
    plan = resolved(plan_of("llama-2-7b", {**TORCHTITAN_PR165, "method.recompute.policy": "full"}))
    st = estimate(plan).heaviest.totals
    alloc, res = _bytes(0.2392), _bytes(0.3264)
    assert alloc == 24_399_709_208 and st.steady == (10_177_240_576, 10_179_337_728)
    layer = 202_383_360 * 4
    low, high = reserved_extra(
        reserve_factors(plan), alloc, alloc, st.steady, st.side, (alloc,) * 2
    )
    assert (low, high) == (8_188_038_016, 8_933_269_971)
    assert low <= res - alloc <= high and 100 * (high - low) / alloc <= 6.0
    assert 100 * (high - low + layer) / alloc > 6.0  # the band before: 0 pending at the low end
    assert high - layer < res - alloc  # no pending block at all (stashed inputs) would miss
    assert low + layer == 8_997_571_456 > res - alloc  # so would two


def test_the_calibration_inputs_are_the_ledgers() -> None:
    """What the calibration reads of the ledger, hand-derived: torchtitan's steady part is
    the fp32 parameters and two AdamW moments, 3 × 8,030,261,248 × 4 B / 8 = 12,045,391,872
    B, plus the 2024 model's one ``freqs_cis`` buffer of 2 × 8,192 positions × 64 complex64
    pairs (8 B) = 8,388,608 B (``runtime.rope_cache = per_model``), plus the forward's and
    backward's cuBLAS workspaces, 2 × 33,554,432 B on H100 (CublasHandlePool.cpp: through
    the caching allocator, kept for the process's life), plus under 1 MiB of step
    counters and token ids (the 2024 step the pair ran zeroed gradients with
    ``set_to_none=True``: none live between steps); the
    Megatron run has no gathered or bucket rows (its buffers are persistent), so no
    side-stream term."""
    titan = estimate(resolved(plan_of("llama-3.1-8b", TORCHTITAN_8B))).heaviest.totals
    kept = 12_045_391_872 + 2 * 8192 * 64 * 8 + 2 * 33_554_432
    assert 0 <= titan.steady[1] - kept < MiB and titan.side > 0
    mega = estimate(resolved(plan_of("llama-3.2-1b", MEGATRON_1_7B))).heaviest.totals
    assert mega.side == 0


def test_the_fraction_model_misses_the_pairs() -> None:
    """The old band (11–36 % of the whole peak) is 25 points wide: it cannot meet the
    6-point criterion on any pair — why it is only the pessimistic option now."""
    plan = resolved(plan_of("llama-3.2-1b", {**MEGATRON_1_7B, "runtime.reserve_model": "fraction"}))
    alloc = int(50_277.15625 * MiB)
    low, high = reserved_extra(reserve_factors(plan), alloc, alloc)
    assert 100 * (high - low) / alloc > 6.0


def test_a_measured_record_calibrates_the_fragmentation() -> None:
    """``memplan calibrate`` under the allocator model proposes runtime.fragmentation
    from a record's reserved and allocated: the Megatron run's (53,386 − 50,277.16) MiB
    over its transient allocated (50,277.16 MiB − the ledger's steady part), no side
    streams; margin 0 gives that one value as the band."""
    plan = plan_of("llama-3.2-1b", MEGATRON_1_7B)
    est = estimate(plan)
    steady = est.heaviest.totals.steady[1]
    alloc, res = int(50_277.15625 * MiB), 53_386 * MiB
    cal = calibrated(plan, est, alloc, res)
    f = (res - alloc) / (alloc - steady)
    band = cal.changes["runtime.fragmentation"]
    assert band["low"] <= f <= band["high"] and band["high"] - band["low"] <= 2e-4
    assert "runtime.allocator_reserve" not in cal.changes


ANSWERAI = [
    # (seq_len, allocated GiB, reserved GiB): benchmarks_03_2024.md, "the peak allocated
    # memory is 8.28 GiB vs 9.16 GiB" and the LoRA table's 10.24 / 10.22 GiB reserved
    (512, 8.28, 10.24),
    (2048, 9.16, 10.22),
]


@pytest.mark.parametrize(("seq", "allocated", "reserved"), ANSWERAI)
def test_the_answerai_fsdp1_pairs_are_inside_the_band(
    seq: int, allocated: float, reserved: float
) -> None:
    """Answer.AI's FSDP1 LoRA runs: the gap is 23.7 % of allocated at 512 tokens and
    11.6 % at 2048, reserved flat while allocated grows by 0.88 GiB — the compute
    stream's construction cache absorbs the transient (engine.allocator.reserve
    ``fsdp1_init_cache``), which no side-stream multiplier can. With the wrap replayed
    under train.py's ``sync_module_states=args["low_memory"]`` (default True:
    engine.allocator.construction ``wrap_cache``, 2,070,925,312 B) the bands are no
    wider than issue 36's 6 points; the formula band they replace (whether the
    broadcast buckets exist, whether the root's originals reuse the layers' blocks)
    spanned 11.4–29.4 and 1.3–16.9 points."""
    sets = {**ANSWERAI_7B_LORA, "batch.seq_len": seq}
    plan = resolved(
        plan_of("llama-2-7b", {**sets, "parallelism.knobs.fsdp1_sync_module_states": True})
    )
    st = estimate(plan).heaviest.totals
    alloc, res = int(allocated * GiB), int(reserved * GiB)
    low, high = reserved_extra(reserve_factors(plan), alloc, alloc, st.steady, st.side)
    pts = (100 * low / alloc, 100 * high / alloc)
    assert pts[0] <= 100 * (res - alloc) / alloc <= pts[1], pts
    assert pts[1] - pts[0] <= 6.0, pts
