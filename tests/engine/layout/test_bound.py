"""The search's peak floors (``engine/layout/proofs/bound.py``) never exceed the estimate.

The search skips a layout, and every smaller DP of its regime with the same batch, when
the floor alone is over the limit; that is sound only if the floor is at most the high
fit peak of every layout it stands for — at every DP and EP of the shape, every stage,
every strategy, recompute policy, schedule and activation profile — by the high figure
for the procurement and arithmetic searches, by the low one for the validation-low
search. Checked on random small plans (``layout_plans.search_plans``) over every legal
layout of a random world size, against the full estimate (every stage) and the search's
decisive-stage one.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from layout_plans import bound_below_estimates, legal_layouts, preset_plans, search_plans

from engine.estimate import estimate
from engine.layout.proofs.bound import PeakFloors
from engine.layout.shapes import Lattice, LayoutPreferences, enumerate_layouts, with_layout
from engine.plan import Plan, with_values
from engine.presets import plan_for_model_preset


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(search_plans(), st.integers(1, 16))
def test_floor_at_most_the_estimate(case: tuple[Plan, int], world: int) -> None:
    plan, _ = case
    _check_layouts(plan, legal_layouts(plan, world))


def _check_layouts(plan: Plan, lattice: Lattice) -> int:
    """Assert the floor is at most both estimates' high, and the low floor at most their
    low, on every legal layout; how many."""
    floors = PeakFloors(plan)
    n = bound_below_estimates(plan, lattice, floors, lambda peak: peak.high)
    low = bound_below_estimates(
        plan, lattice, lambda lay: floors(lay, "low"), lambda peak: peak.low
    )
    assert low == n
    return n


def test_floor_at_most_the_estimate_on_presets() -> None:
    """The same on real models, every legal layout of 8 GPUs (PP up to 8, CP, EP)."""
    for plan in preset_plans():
        assert _check_layouts(plan, legal_layouts(plan, 8))


def test_low_floor_proves_deepseek_v3_shapes_over_by_the_low_figure() -> None:
    """DeepSeek-V3 (its preset: FSDP2, H100 80 GB, 4,096 tokens) at TP 1, PP 1, CP 1 on
    256 ranks: a rank saves the activations of all 61 layers for one micro-batch, far over
    the 76.4 GB limit by the low figure too — the validation-low search drops the shape
    by this floor (one canonical activation sum per shape) instead of a low bound per
    layout (each its shared rows: nearly an estimate). The floor stays below the
    estimate's low, and below the high floor."""
    plan = plan_for_model_preset("deepseek-v3")
    floors = PeakFloors(plan)
    lay = next(
        x for x in legal_layouts(plan, 256).legal if (x.tp, x.pp, x.cp, x.ep) == (1, 1, 1, 8)
    )
    low = floors(lay, "low")
    assert plan.hbm_limit_bytes < low < floors(lay)
    assert low <= estimate(with_layout(plan, lay), decisive_only=True).fit_peak.low


def test_floor_falls_with_dp_and_ignores_ep() -> None:
    """Non-increasing in DP with the batch held (the search checks each batch's largest
    DP of a regime), and the same at every EP of a shape."""
    plan = plan_for_model_preset("mixtral-8x7b")
    floors = PeakFloors(plan)
    base = next(iter(legal_layouts(plan, 8).legal))
    values = [floors(replace(base, dp=d)) for d in (1, 2, 4, 8, 64)]
    assert values == sorted(values, reverse=True)
    assert values[0] > values[-1]  # the resident states' share does shrink
    assert floors(replace(base, ep=2)) == floors(replace(base, ep=8))


def test_floor_counts_the_moe_working_set_at_the_widest_ep() -> None:
    """Llama-4-Maverick (FSDP2 preset, H100 80 GB) at TP 2, PP 3, CP 4, DP 8: a MoE
    layer's backward working set holds its local experts' unsharded gradients, 128 ÷ EP
    of them (``engine/ledger/activations/working.py``, ``moe_working_terms``): 17 GB at
    EP 1, 0.3 GB at EP 64. A floor taken at EP 1 put 75.2 GB over an estimate of 73.0 GB
    at EP 64 (and would have refused layouts that fit once it neared the 76.4 GB limit);
    taken at the widest EP it stays below the estimate at every EP."""
    plan = plan_for_model_preset("llama-4-maverick")
    floors = PeakFloors(plan)
    layouts = [
        x
        for x in enumerate_layouts(plan, 192, LayoutPreferences()).legal
        if (x.tp, x.pp, x.cp, x.dp) == (2, 3, 4, 8)
    ]
    assert {x.ep for x in layouts} >= {1, 64}
    for lay in layouts:
        assert floors(lay) <= estimate(with_layout(plan, lay), decisive_only=True).fit_peak.high


def test_deepseek_v3_tp4_without_cp_is_over_the_limit_by_activations() -> None:
    """DeepSeek-V3 (FSDP2 preset, H100 80 GB, 4,096 tokens, no recompute) at TP 4, PP 1,
    CP 1 saves ~124 GB of activations per rank for its 61 layers — over the 76.4 GB limit
    at any DP and EP, so the search skips the shape without an estimate; the estimate
    agrees (its high peak is larger still)."""
    plan = with_values(plan_for_model_preset("deepseek-v3"), {"parallelism.strategy": "fsdp2"})
    floors = PeakFloors(plan)
    lay = next(
        x for x in legal_layouts(plan, 2048).legal if (x.tp, x.pp, x.cp, x.ep) == (4, 1, 1, 16)
    )
    floor = floors(lay)
    assert floor > plan.hbm_limit_bytes
    assert floor <= estimate(with_layout(plan, lay), decisive_only=True).fit_peak.high
