"""The low search's bound (``engine/layout/proofs/low_bound.py``) never exceeds the low estimate.

The low search skips a layout when a stage's bound is over the limit, and a regime's
smaller DPs when it is over by more than the stage's padding slack; sound only if each
stage's bound is at most that stage's low fit peak (and so the layout's, the largest of
any stage) — at every DP, EP, stage, strategy, recompute policy, schedule, optimizer
and activation profile. Checked on random small plans (``layout_plans.search_plans``)
over every legal layout of a random world size, against the full estimate and the
search's decisive-stage one, and the regime rule against brute force.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from layout_plans import (
    SEARCH_SETTINGS,
    bound_below_estimates,
    legal_layouts,
    preset_plans,
    search_plans,
)

from engine.errors import PlanError
from engine.estimate import estimate
from engine.layout.lattice.point import Layout
from engine.layout.lattice.shapes import (
    Lattice,
    LayoutPreferences,
    legal_shapes,
    with_layout,
)
from engine.layout.proofs.bound import PeakFloors
from engine.layout.proofs.evaluate import Evaluator, stage_padded
from engine.layout.proofs.low_bound import LowFloors
from engine.layout.proofs.regimes import SearchMemo
from engine.layout.proofs.state_bound import StateFloors
from engine.plan import Plan, with_values
from engine.presets import plan_for_model_preset


def _check_layouts(plan: Plan, lattice: Lattice) -> int:
    """Assert the bound is at most both estimates' low on every legal layout; how many."""
    return bound_below_estimates(plan, lattice, LowFloors(PeakFloors(plan)), lambda p: p.low)


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(search_plans(), st.integers(1, 16))
def test_low_bound_at_most_the_low_estimate(case: tuple[Plan, int], world: int) -> None:
    plan, _ = case
    _check_layouts(plan, legal_layouts(plan, world))


def test_low_bound_at_most_the_low_estimate_on_presets() -> None:
    """The same on real models, every legal layout of 8 GPUs (PP up to 8, CP, EP)."""
    for plan in preset_plans():
        assert _check_layouts(plan, legal_layouts(plan, 8))


def _stage_parts(plan: Plan, lattice: Lattice) -> int:
    """Each decisive stage's bound against the full estimate's stage, on every legal
    layout that estimates: at most its own low fit peak (what makes one stage over the
    limit a proof), and its padded bytes exactly the stage's padded rows' (what the
    regime rule's slack is of: ``evaluate.stage_padded``). How many stages compared."""
    floors = LowFloors(PeakFloors(plan))
    compared = 0
    for lay in lattice.legal:
        try:
            full = estimate(with_layout(plan, lay))
        except PlanError:
            continue
        bounds = floors.stage_lows(lay)
        if bounds is None:
            continue
        for stage, got in bounds.items():
            st = full.stages[stage]
            assert got.bound <= st.fit_peak.low, (lay, stage)
            assert got.padded == stage_padded(st), (lay, stage)
            compared += 1
    return compared


@SEARCH_SETTINGS
@given(search_plans(), st.integers(1, 16))
def test_stage_bounds_below_each_stages_low(case: tuple[Plan, int], world: int) -> None:
    plan, _ = case
    _stage_parts(plan, legal_layouts(plan, world))


def test_stage_bounds_below_each_stages_low_on_presets() -> None:
    """The same on real models, every legal layout of 8 GPUs (PP up to 8)."""
    for plan in preset_plans():
        assert _stage_parts(plan, legal_layouts(plan, 8))


def test_deepseek_v3_tp4_without_cp_is_over_the_limit_by_the_low_bound() -> None:
    """DeepSeek-V3 (FSDP2, H100 80 GB, 4,096 tokens, no recompute) at TP 4, PP 1, CP 1
    saves ~124 GB of activations per rank: its low fit peak is over the 76.4 GB limit
    too, and the bound proves it without an estimate (and stays below the estimate)."""
    plan = with_values(plan_for_model_preset("deepseek-v3"), {"parallelism.strategy": "fsdp2"})
    floors = LowFloors(PeakFloors(plan))
    lay = next(
        x for x in legal_layouts(plan, 2048).legal if (x.tp, x.pp, x.cp, x.ep) == (4, 1, 1, 16)
    )
    bound = floors(lay)
    assert bound > plan.hbm_limit_bytes
    assert floors.judge(lay, regime=True) == "dead"
    assert bound <= estimate(with_layout(plan, lay), decisive_only=True).fit_peak.low


def test_deepseek_v3_pp3_one_stage_over_settles_it() -> None:
    """DeepSeek-V3 (FSDP2, H100 80 GB) at TP 1, PP 3, CP 2, EP 8, DP 80: the first stage
    holds the most micro-batches in flight and its bound alone (~113 GB) is over the
    76.4 GB limit, so the verdict needs no other stage's shared rows (the last stage,
    with the fewest in flight, is within it by its bound, ~75.6 GB) — and the bound stays
    at most the estimate's low."""
    plan = plan_for_model_preset("deepseek-v3")
    floors = LowFloors(PeakFloors(plan))
    lay = Layout(1, 3, 2, 8, 80, 1, 3, 1, (20, 21, 20))
    assert floors.judge(lay, regime=True) == "dead"
    assert floors.stages_worked == 1
    bound = floors(lay)
    assert floors.stages_worked == 3
    assert bound > plan.hbm_limit_bytes
    assert bound <= estimate(with_layout(plan, lay), decisive_only=True).fit_peak.low


def _regime_rule_against_brute_force(plan: Plan, max_gpus: int) -> int:
    """The low search's regime-wide rule (``search._Shape._low_floor``) against
    brute force: wherever the bound proves a regime's DP dead (a stage over the limit by
    more than its padding slack), that layout and every smaller DP of its regime fail by
    the low estimate. How many layouts the rule proved."""
    floors = LowFloors(PeakFloors(plan))
    memo = SearchMemo(plan, full=False, padding=1.0)
    ev = Evaluator(plan)
    proved = 0
    for shape in legal_shapes(plan, max_gpus, LayoutPreferences.hard_rules_only()):
        for group in memo.regimes(shape, max_gpus // shape.model_parallel, 1).values():
            for i, lay in enumerate(group):
                if floors.judge(lay, regime=True) != "dead":
                    continue
                proved += 1
                for smaller in group[: i + 1]:
                    assert not ev(smaller).fits_low, (lay, smaller)
    return proved


@SEARCH_SETTINGS
@given(search_plans())
def test_regime_wide_low_bound_proves_only_failures(case: tuple[Plan, int]) -> None:
    plan, max_gpus = case
    _regime_rule_against_brute_force(plan, max_gpus)


def test_regime_wide_low_bound_on_presets() -> None:
    """The same on real models up to 64 GPUs."""
    proved = 0
    for plan in preset_plans():
        proved += _regime_rule_against_brute_force(plan, 64)
    assert proved  # the rule is exercised


def _dominates_state_bound(plan: Plan, layouts: tuple[Layout, ...]) -> int:
    """Where the low bound is known, it is at least the state bound's low
    (:mod:`engine.layout.proofs.state_bound`): what lets the low search skip the state bound of
    a layout within the low one (``search._Shape.probe``). How many layouts compared."""
    floors = PeakFloors(plan)
    low, states = LowFloors(floors), StateFloors(floors)
    compared = 0
    for lay in layouts:
        bound = low(lay)
        if bound:
            compared += 1
            assert bound >= states(lay)[0], lay
    return compared


@SEARCH_SETTINGS
@given(search_plans(), st.integers(1, 16))
def test_low_bound_dominates_the_state_bound(case: tuple[Plan, int], world: int) -> None:
    plan, _ = case
    _dominates_state_bound(plan, legal_layouts(plan, world).legal)


def test_low_bound_dominates_the_state_bound_on_presets() -> None:
    """The same on real models, every legal layout of 8 GPUs."""
    assert sum(_dominates_state_bound(p, legal_layouts(p, 8).legal) for p in preset_plans())
