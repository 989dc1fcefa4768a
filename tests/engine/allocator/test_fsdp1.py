"""FSDP1's reserve (engine.allocator.reserve: ``fsdp1_init_cache``, ``ReserveModel.fsdp1``),
hand-derived from torch's FSDP1 code: ``_init_utils._init_param_handle_from_module`` and
``FlatParamHandle.shard`` (the construction cache), ``_runtime_utils._unshard`` and
``FlatParamHandle._free_unsharded_flat_param`` (the unshard stream's pool)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from engine.allocator.reserve import (
    ReserveModel,
    SideBytes,
    fsdp1_init_cache,
    reserved_extra,
    stuck_extra,
)
from engine.estimate import estimate
from engine.ledger.peaks.runtime import communicators
from engine.stacks.defaults import resolved
from engine.units import GiB
from tests.engine.allocator.published import ANSWERAI_7B_LORA, plan_of

UNIT = 404_766_720
"""A Llama-2-7B decoder layer in bf16: q, k, v, o 4 × 4096² + gate, up, down 3 × 4096 ×
11008 + two norms 2 × 4096 = 202,383,360 parameters × 2 B."""
ROOT = 524_296_192
"""Its root unit: embedding and lm_head 2 × 32000 × 4096 + final norm 4096 = 262,148,096
parameters × 2 B."""


def test_the_construction_cache_of_a_7b_lora() -> None:
    """Low 2 × unit + root = 809,533,440 + 524,296,192 = 1,333,829,632 B (originals and
    flat parameter of a layer, the root's flat parameter); high 3 × unit + 2.5 × root =
    1,214,300,160 + 1,310,740,480 = 2,525,040,640 B (with the layer's broadcast bucket and
    the root's originals and lm_head bucket). The ledger reads the same unit and root off
    its gathered rows (layers row = 2 units under limit_all_gathers)."""
    assert fsdp1_init_cache(ROOT, UNIT) == (1_333_829_632, 2_525_040_640)
    # a plain Llama layer's plan replays its wrap instead (tests/engine/allocator/
    # test_construction.py): without and with sync_module_states, inside the formula band
    plan = resolved(plan_of("llama-2-7b", {**ANSWERAI_7B_LORA, "batch.seq_len": 512}))
    side = estimate(plan).heaviest.totals.side
    assert isinstance(side, SideBytes)
    assert side.unit == UNIT and side.init == (1_604_317_184, 2_070_925_312)
    assert 1_333_829_632 <= side.init[0] <= side.init[1] <= 2_525_040_640


def test_fsdp2_and_zero3_carry_no_construction_cache() -> None:
    """Only FSDP1 builds flat parameters at wrap time: the torchtitan-like FSDP2 plan's
    side bytes carry none."""
    plan = resolved(plan_of("llama-2-7b", {**ANSWERAI_7B_LORA, "parallelism.strategy": "fsdp2"}))
    side = estimate(plan).heaviest.totals.side
    assert getattr(side, "init", (0, 0)) == (0, 0) and getattr(side, "unit", 0) == 0


FSDP1 = ReserveModel(False, (0.05, 0.09), (1.55, 1.74), False, None, True)


def test_the_step_reuses_the_cache_and_the_side_pool_adds_one_unit_at_most() -> None:
    """Allocated 8 GiB, persistent 6 GiB (transient t = 2 GiB), side rows 1.5 GiB (so the
    compute stream's own transient is 0.5 GiB), cache 1.25–2 GiB, unit 0.375 GiB:
    low = max(0.05 × 2, 1.25 − 0.5) = 0.75 GiB; high = max(0.09 × 2, 2 − 0.5) + 0.375 =
    1.875 GiB. The FSDP2 multiplier (1.55–1.74 × 1.5 GiB) is not applied."""
    side = SideBytes(3 * GiB // 2, (5 * GiB // 4, 2 * GiB), 3 * GiB // 8)
    steady = (6 * GiB, 6 * GiB)
    assert reserved_extra(FSDP1, 8 * GiB, 8 * GiB, steady, side) == (
        3 * GiB // 4,
        15 * GiB // 8,
    )
    # a transient past the cache: fragmentation decides, 0.05–0.09 × 10 GiB
    big = reserved_extra(FSDP1, 16 * GiB, 16 * GiB, steady, side)
    assert big == (int(10 * GiB * 0.05), int(10 * GiB * 0.09) + 3 * GiB // 8)


@given(
    t=st.integers(0, 64 * GiB),
    side=st.integers(0, 8 * GiB),
    init=st.tuples(st.integers(0, 4 * GiB), st.integers(0, 4 * GiB)).map(sorted),
    unit=st.integers(0, GiB),
)
def test_the_cache_is_released_before_an_oom_and_the_band_is_ordered(
    t: int, side: int, init: list[int], unit: int
) -> None:
    """The construction cache is wholly free segments, which the allocator frees and
    retries before an out-of-memory: what the fit test adds (stuck_extra) does not read
    it; the reserve band is ordered and never below the fragmentation alone."""
    steady = (8 * GiB, 8 * GiB)
    s = SideBytes(side, (init[0], init[1]), unit)
    low, high = reserved_extra(FSDP1, steady[0] + t, steady[1] + t, steady, s)
    assert 0 <= low <= high
    assert low >= int(t * 0.05) and high >= int(t * 0.09)
    plain = stuck_extra(FSDP1, steady[0] + t, steady[1] + t, steady)
    assert plain == (int(t * 0.05), int(t * 0.09))
    assert high - max(int(t * 0.09), init[1] - max(0, t - side)) == unit


def test_deepspeed_keeps_a_world_communicator_beside_its_cloned_dp_group() -> None:
    """deepspeed/utils/groups.py ``_get_data_parallel_group`` returns
    ``_clone_world_group()`` (``dist.new_group`` over all ranks) when no mpu is given, and
    the launcher's barriers use the default group: ZeRO-3 over 8 ranks keeps two NCCL
    communicators, FSDP1 over the same 8 ranks one (source-review R10)."""
    sets = {**ANSWERAI_7B_LORA, "batch.seq_len": 512, "parallelism.dp": 8}
    zero3 = resolved(plan_of("llama-2-7b", {**sets, "parallelism.strategy": "zero3"}))
    fsdp1 = resolved(plan_of("llama-2-7b", sets))
    assert len(communicators(zero3, 0)) == 2 and len(communicators(fsdp1, 0)) == 1


def test_the_published_reserved_after_wrap_lies_in_the_construction_band() -> None:
    """Answer.AI's QLoRA 7B run (benchmarks_03_2024.md: "It's actually about 3.72GiB (see
    `reserved_after_model_wrap`)"): after the wrap only the weights and adapters exist
    (gradients and AdamW moments come with the first step), so reserved is those rows
    plus the construction cache — 3.72 GiB must lie in that band (near its high end:
    train.py's default low_memory wraps with sync_module_states, the broadcast buckets
    of the high end)."""
    sets = {**ANSWERAI_7B_LORA, "method.kind": "qlora", "batch.seq_len": 512}
    h = estimate(resolved(plan_of("llama-2-7b", sets))).heaviest
    wrapped = sum(
        r.high
        for r in h.rows
        if r.location == "hbm" and r.kind == "persistent" and r.state == "weights"
    )
    init = h.totals.side.init  # type: ignore[attr-defined]
    assert wrapped + init[0] <= int(3.72 * GiB) <= wrapped + init[1]
