"""The search's pruning is sound: its counts equal brute force on small lattices.

Brute force estimates every legal layout of every world size up to the bound and takes
the cheapest that fits (the plan's own layout among them); the search estimates a few
per shape, pruning by DP regimes and cost (``engine/layout/minimum.py``), reusing what
one search proved in the next (``proofs.regimes.Known``) and skipping layouts whose peak floor
already exceeds the limit (``engine/layout/proofs/bound.py``). The plans
(``layout_plans.search_plans``) put every non-monotone step the search must respect in
play: DP 1 → 2, the expert DP group appearing, HSDP's shard group moving, ranks per
node still growing, FSDP padding.
"""

from __future__ import annotations

from hypothesis import given, settings
from layout_plans import SEARCH_SETTINGS, search_plans

from engine.estimate import estimate
from engine.layout.counts import gpu_counts
from engine.layout.point import procurement
from engine.layout.shapes import (
    LayoutPreferences,
    enumerate_layouts,
    layout_of,
    with_layout,
)
from engine.plan import Plan


def _brute(
    plan: Plan, max_gpus: int, prefs: LayoutPreferences, figure: str, node: bool
) -> int | None:
    """The least cost of a fitting layout: every legal layout of every world estimated."""
    g, rounding = plan.hardware.gpus_per_node, plan.policy.rounding

    def cost(w: int) -> int:
        return procurement(w, g, rounding) if node else w

    def fits(p: Plan) -> bool:
        e = estimate(p, decisive_only=True)
        value = e.fit_peak.high if figure == "high" else e.fit_peak.low
        return value <= e.limit_bytes and not e.nodes.problems()

    best: int | None = None
    own = layout_of(plan)
    if own.world_size <= max_gpus and fits(plan):
        best = cost(own.world_size)
    for w in range(1, max_gpus + 1):
        if best is not None and cost(w) >= best:
            break
        if any(fits(with_layout(plan, lay)) for lay in enumerate_layouts(plan, w, prefs).legal):
            best = cost(w)
    return best


@SEARCH_SETTINGS
@given(search_plans())
def test_counts_equal_brute_force(case: tuple[Plan, int]) -> None:
    """Arithmetic minimum (relaxed preferences, exact ranks), the procurement count
    (node rounding) and the low end of the validation range, each equal to brute force."""
    _check(case)


@settings(SEARCH_SETTINGS, max_examples=150)
@given(search_plans(cross_ep=True))
def test_counts_equal_brute_force_under_the_cross_ep_rule(case: tuple[Plan, int]) -> None:
    """The same on MoE plans the cross-EP rule holds for (``engine/layout/proofs/cross_ep.py``:
    FSDP2, 4 or 8 experts, so each shape meets EP 1, 2, 4 and 8), where the search
    proves narrow EPs over by their widest EP's bound or estimate."""
    _check(case)


def _check(case: tuple[Plan, int]) -> None:
    plan, max_gpus = case
    prefs = LayoutPreferences()
    c = gpu_counts(plan, max_gpus=max_gpus, budget_s=None)
    assert c.first_layout.gpus == _brute(plan, max_gpus, prefs, "high", True)
    assert c.arithmetic_min.gpus == _brute(plan, max_gpus, prefs.relaxed(), "high", False)
    assert c.validation_low.gpus == _brute(plan, max_gpus, prefs, "low", True)
