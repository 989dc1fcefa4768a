"""FSDP2's stream pools in the reserve (engine/allocator/fsdp2_pools.py), hand-derived.

Sources: torch ``distributed/fsdp/_fully_shard/_fsdp_collectives.py`` —
``foreach_all_gather`` allocates each unit's all-gather output under
``all_gather_copy_in_stream`` (``all_gather_copy_in``); ``foreach_reduce`` allocates the
reduce-scatter input on the current stream and ``reduce_output`` under
``reduce_scatter_stream``, the sharded gradients being views of it; the caching
allocator reuses a freed block only on its own stream (``CUDACachingAllocator.cpp``).
torchtitan ``train.py`` at 9dec370: ``loss_fn`` = ``cross_entropy(pred.flatten(0,
1).float(), labels.flatten(0, 1))``, then ``del pred`` and ``loss.backward()``.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from engine.allocator.fsdp2_pools import Fsdp2Pools, fsdp2_extra
from engine.estimate import estimate
from engine.stacks.defaults import resolved
from engine.validation.published import case_plan, load_cases
from tests.engine.allocator.published import calibrated, plan_of

FRAG, SIDE = (0.05, 0.09), (1.55, 1.74)


def _case(case_id: str) -> object:
    return next(c for c in load_cases() if c.id == case_id)


def test_the_loss_moment_adds_the_freed_pools_and_the_logits_hole() -> None:
    """At the loss's backward: 0.05 × (10 GB transient − 4 GB of loss blocks) = 0.3 GB,
    1.55 × 2 GB all-gather working set = 3.1 GB, the 1.5 GB sharded gradients in the
    reduce-scatter pool and the 0.5 GB 16-bit logits hole: 5.4 GB; high end 0.09 × 6 GB
    = 0.54 + 3.48 + 1.5 + 0.5 = 6.02 GB."""
    pools = Fsdp2Pools(ag=2_000_000_000, rs=1_500_000_000, hole=500_000_000, loss=4 * 10**9)
    got = fsdp2_extra(FRAG, SIDE, pools, (10 * 10**9, 10 * 10**9), (True, True))
    assert got == (5_400_000_000, 6_020_000_000)


def test_other_moments_carry_no_loss_terms() -> None:
    """Away from the loss the transient keeps its loss blocks' share and no hole, and the
    reduce-scatter pool's gradients are free (steady, forward, the layers' backward before
    their reduce-scatters refill it) or allocated (the optimizer step): 0.5 + 3.1 = 3.6 GB
    .. 0.9 + 3.48 + 1.5 = 5.88 GB, for the backward phase peaking in the layers as for
    the other phases."""
    pools = Fsdp2Pools(ag=2_000_000_000, rs=1_500_000_000, hole=500_000_000, loss=4 * 10**9)
    t = (10 * 10**9, 10 * 10**9)
    assert fsdp2_extra(FRAG, SIDE, pools, t, (False, False)) == (3_600_000_000, 5_880_000_000)
    assert fsdp2_extra(FRAG, SIDE, pools, t, None) == (3_600_000_000, 5_880_000_000)


def test_torchtitan_2024_pools_from_the_rows() -> None:
    """torchtitan-8b-fsdp8-sac (Llama-3.1-8B, FSDP2 × 8, b 2 × s 8192, 9dec370): the
    all-gather working set is the whole-model root unit (embedding + lm_head, 2 ×
    128,256 × 4,096 + 4,096 norm = 1,050,677,248 el. × 2 B = 2,101,354,496 B) beside one
    layer unit (218,112,000 el. × 2 B = 436,224,000 B); the reduce-scatter pool the fp32
    sharded gradients (4,015,130,624 B, the hbm.grads row); the hole the bf16 logits,
    16,384 tokens × 128,256 × 2 = 4,202,692,608 B; the loss blocks the saved fp32
    log-probs and its backward's two fp32 gradients, 3 × 16,384 × 128,256 × 4 =
    25,216,155,648 B."""
    side = estimate(case_plan(_case("torchtitan-8b-fsdp8-sac"))).heaviest.totals.side
    pools = side.fsdp2  # type: ignore[attr-defined]
    assert pools == Fsdp2Pools(2_537_578_496, 4_015_130_624, 4_202_692_608, 25_216_155_648)


def test_more_ranks_shrink_only_the_reduce_scatter_pool() -> None:
    """The same run on 128 ranks (Table 3): the sharded gradients are 16 × smaller,
    8,030,261,248 ÷ 128 → 62,736,416 el. × 4 B in 291 tensors, each rounded up to 512 B:
    250,970,624 B (the hbm.grads row); the all-gather working set and the loss's blocks
    are the same. So the reserve over allocated at the peak falls by the pool's
    3,764,160,000 B (on the old side-stream share, by 0): the measured reserved figures
    fall by 15.4 GiB where the three sharded states fall by 10.5."""
    e8 = estimate(case_plan(_case("torchtitan-8b-fsdp8-sac"))).heaviest
    e128 = estimate(case_plan(_case("torchtitan-8b-fsdp128-sac"))).heaviest
    p8, p128 = e8.totals.side.fsdp2, e128.totals.side.fsdp2  # type: ignore[attr-defined]
    assert p128 == p8._replace(rs=250_970_624)
    extra8 = e8.reserved_peak.low - e8.peak.low
    extra128 = e128.reserved_peak.low - e128.peak.low
    assert extra8 - extra128 == 4_015_130_624 - 250_970_624


def test_zero_fill_and_accumulation_keep_the_gradients_allocated() -> None:
    """``zero_grad(set_to_none=False)`` fills the gradients in place and accumulation
    keeps them across micro-batches: the reduce-scatter pool's blocks stay allocated
    (counted in the gradient rows), so none is free beyond them."""
    base = {"stack.name": "torchtitan", "parallelism.strategy": "fsdp2", "parallelism.dp": 8}
    for extra in ({"runtime.zero_grad": "zero_fill"}, {"batch.grad_accum": 2}):
        plan = resolved(plan_of("llama-3.1-8b", {**base, **extra}))
        assert estimate(plan).heaviest.totals.side.fsdp2.rs == 0  # type: ignore[attr-defined]


@given(
    t=st.integers(0, 10**11),
    loss=st.integers(0, 10**11),
    ag=st.integers(0, 10**10),
    rs=st.integers(0, 10**10),
    hole=st.integers(0, 10**10),
)
def test_the_band_is_ordered_and_the_loss_moment_never_below_the_layers(
    t: int, loss: int, ag: int, rs: int, hole: int
) -> None:
    """Low ≤ high for each moment kind; at the loss the reserve is at least what the
    pools alone hold (the freed gradients, the hole, the all-gather set)."""
    pools = Fsdp2Pools(ag, rs, hole, loss)
    for at in ((True, True), (False, False), None):
        low, high = fsdp2_extra(FRAG, SIDE, pools, (t, t), at)
        assert 0 <= low <= high
    low, _ = fsdp2_extra(FRAG, SIDE, pools, (t, t), (True, True))
    assert low >= rs + hole + int(ag * SIDE[0])


def test_the_reserve_row_names_each_pool_with_its_bytes() -> None:
    """The row's formula says what the numbers are (test_torchtitan_2024_pools_from_the_rows)."""
    est = estimate(case_plan(_case("torchtitan-8b-fsdp8-sac")))
    row = next(r for r in est.rows if r.id == "hbm.runtime.allocator_reserve")
    text = row.formula
    for part in ("2,537,578,496", "4,015,130,624", "4,202,692,608", "25,216,155,648"):
        assert part in text


def test_no_logits_hole_under_pipeline_parallelism() -> None:
    """torchtitan's ``del pred`` runs in its non-PP branch only: under PP the schedule
    computes the loss and keeps the last stage's output for its backward, so the last
    stage has no freed logits block; without PP the same plan has the bf16 logits,
    2 × 8,192 × 128,256 × 2 = 4,202,692,608 B."""
    sets = {
        "stack.name": "torchtitan",
        "parallelism.strategy": "fsdp2",
        "runtime.loss_impl": "eager",
        "runtime.torchtitan_version": "0.0.2",
        "batch.micro_batch": 2,
        "batch.seq_len": 8192,
    }
    flat = estimate(resolved(plan_of("llama-3.1-8b", {**sets, "parallelism.dp": 8})))
    assert flat.heaviest.totals.side.fsdp2.hole == 4_202_692_608  # type: ignore[attr-defined]
    pp = {**sets, "parallelism.dp": 4, "parallelism.pp": 2}
    last = estimate(resolved(plan_of("llama-3.1-8b", pp))).stages[-1]
    assert last.totals.side.fsdp2.hole == 0  # type: ignore[attr-defined]


def test_a_measured_record_calibrates_fsdp2_fragmentation_past_its_pools() -> None:
    """``memplan calibrate`` on the torchtitan 8B plan (torchtitan-8b-fsdp8-sac) with a
    record of 70 GiB allocated, 84 GiB reserved: the pools at the loss are 1.645 (the
    middle of 1.55–1.74) × 2,537,578,496 + 4,015,130,624 + 4,202,692,608 B, the transient
    70 GiB − the steady part − the loss's 25,216,155,648 B; margin 0 gives that value."""
    plan = case_plan(_case("torchtitan-8b-fsdp8-sac"))
    est = estimate(plan)
    steady = est.heaviest.totals.steady[1]
    alloc, res = 70 * 2**30, 84 * 2**30
    band = calibrated(plan, est, alloc, res).changes["runtime.fragmentation"]
    pools = 1.645 * 2_537_578_496 + 4_015_130_624 + 4_202_692_608
    f = (res - alloc - pools) / (alloc - steady - 25_216_155_648)
    assert band["low"] <= f <= band["high"] and band["high"] - band["low"] <= 2e-4
