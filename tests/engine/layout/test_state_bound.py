"""The state bound (``engine/layout/proofs/stage_bounds.py``) never exceeds the estimate, and
falls with DP within a regime.

The search skips a layout, and every smaller DP of its regime with the same batch, when
the bound at that batch's largest DP is over the limit (by the high figure in the
procurement and arithmetic searches, the low one in the validation search). Sound only
if (1) the bound is at most the estimate's figure at that very layout — at every DP, EP,
stage, strategy, recompute policy, schedule, offload and activation profile — and (2)
the bound at a smaller DP of the same shape, regime and batch is at least as large.
Checked on random small plans (``layout_plans.search_plans``) and on real models.
"""

from __future__ import annotations

from itertools import pairwise

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from layout_plans import (
    SEARCH_SETTINGS,
    bound_below_estimates,
    legal_layouts,
    preset_plans,
    search_plans,
)

from engine.estimate import estimate
from engine.layout.point import Layout
from engine.layout.proofs.bound import PeakFloors
from engine.layout.proofs.regimes import SearchMemo
from engine.layout.proofs.stage_bounds import StateFloors
from engine.layout.shapes import (
    Lattice,
    LayoutPreferences,
    legal_shapes,
    with_layout,
)
from engine.plan import Plan
from engine.presets import plan_for_model_preset


def _check_layouts(plan: Plan, lattice: Lattice) -> int:
    """Assert both ends of the bound are at most both estimates' on every legal layout."""
    bound = StateFloors(PeakFloors(plan))
    low = bound_below_estimates(plan, lattice, lambda lay: bound(lay)[0], lambda p: p.low)
    high = bound_below_estimates(plan, lattice, lambda lay: bound(lay)[1], lambda p: p.high)
    assert low == high
    return low


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(search_plans(), st.integers(1, 16))
def test_state_bound_at_most_the_estimate(case: tuple[Plan, int], world: int) -> None:
    plan, _ = case
    _check_layouts(plan, legal_layouts(plan, world))


def test_state_bound_at_most_the_estimate_on_presets() -> None:
    """The same on real models, every legal layout of 8 GPUs (PP up to 8, CP, EP)."""
    for plan in preset_plans():
        assert _check_layouts(plan, legal_layouts(plan, 8))


def _falls_within_regimes(plan: Plan, max_gpus: int) -> int:
    """Assert the bound never rises from a smaller to a larger DP of one shape, regime
    and batch (both ends); how many pairs were compared."""
    bound = StateFloors(PeakFloors(plan))
    memo = SearchMemo(plan, full=False, padding=1.0)
    pairs = 0
    for shape in legal_shapes(plan, max_gpus, LayoutPreferences.hard_rules_only()):
        for group in memo.regimes(shape, max_gpus // shape.model_parallel, 1).values():
            by_batch: dict[tuple[int, int], list[Layout]] = {}
            for lay in group:
                by_batch.setdefault((lay.micro_batch, lay.grad_accum), []).append(lay)
            for lays in by_batch.values():
                for smaller, larger in pairwise(lays):
                    a, b = bound(smaller), bound(larger)
                    assert a[0] >= b[0] and a[1] >= b[1], larger
                    pairs += 1
    return pairs


@SEARCH_SETTINGS
@given(search_plans())
def test_state_bound_falls_with_dp_within_a_regime(case: tuple[Plan, int]) -> None:
    plan, max_gpus = case
    _falls_within_regimes(plan, max_gpus)


def test_state_bound_falls_with_dp_on_presets() -> None:
    """The same on real models up to 64 GPUs."""
    for plan in preset_plans():
        assert _falls_within_regimes(plan, 64)


def test_mixtral_8x22b_states_alone_exceed_the_limit() -> None:
    """Mixtral-8x22B (FSDP2 preset, H100 80 GB) at TP 2, PP 1, CP 2, EP 8, DP 32 holds
    ~203 GB of weights and optimizer state per rank against a 76.4 GB limit: the state
    bound proves both figures over without an estimate, where the peak floor (states
    spread over all 128 ranks) cannot; and it stays below the estimate."""
    plan = plan_for_model_preset("mixtral-8x22b")
    lay = next(
        x for x in legal_layouts(plan, 128).legal if (x.tp, x.pp, x.cp, x.ep) == (2, 1, 2, 8)
    )
    low, high = StateFloors(PeakFloors(plan))(lay)
    assert PeakFloors(plan)(lay) <= plan.hbm_limit_bytes < low <= high
    fit = estimate(with_layout(plan, lay), decisive_only=True).fit_peak
    assert low <= fit.low and high <= fit.high
