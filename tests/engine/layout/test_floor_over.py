"""The peak floor's verdict (``PeakFloors.over``, ``engine/layout/bound.py``) that the
search prunes by: worked out stage by stage and stopped at the first stage over the
limit, it says what ``floor > limit`` says wherever the floor is known, and a canonical
plan's stages worked out piecemeal are those worked out at once.

The reference is the floor's value (every decisive stage of the canonical plan worked
out together); ``test_bound.py`` checks that value against the estimate. Checked on
random small plans (``layout_plans.search_plans``) at limits around each stage's floor,
a fresh ``PeakFloors`` per limit so each one meets the canonical plans unworked.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from layout_plans import SEARCH_SETTINGS, legal_layouts, search_plans

from engine.errors import PlanError
from engine.estimate import estimate
from engine.layout.bound import PeakFloors
from engine.layout.lattice import with_layout
from engine.layout.point import Layout
from engine.ledger.peaks.runtime import reserve_row
from engine.plan import Plan


def _stage_values(floors: PeakFloors, lay: Layout) -> list[int]:
    """Each decisive stage's floor at ``lay`` (what the floor is the largest of)."""
    got = floors.canonical(lay)
    if got is None:
        return []
    laid, stages = got
    ranks = lay.world_size // lay.pp
    out = []
    for part in stages:
        held = part.activations + -(-part.resident // ranks)
        out.append(held + reserve_row(laid, 0, held).high + part.runtime)
    return out


@SEARCH_SETTINGS
@given(search_plans(), st.integers(1, 16), st.randoms(use_true_random=False))
def test_over_is_the_floor_over_the_limit(case: tuple[Plan, int], world: int, rnd: object) -> None:
    plan, _ = case
    layouts = list(legal_layouts(plan, world).legal)
    reference = PeakFloors(plan)
    limits = {0, plan.hbm_limit_bytes}
    for lay in layouts:
        for v in _stage_values(reference, lay):
            limits |= {v - 1, v}
    for limit in sorted(limits):
        floors = PeakFloors(plan)
        order = layouts[:]
        rnd.shuffle(order)  # type: ignore[attr-defined]
        for lay in order:
            value = reference(lay)
            over = floors.over(lay, limit)
            if value:
                assert over == (value > limit), (lay, limit)
            if over:
                try:
                    high = estimate(with_layout(plan, lay), decisive_only=True).fit_peak.high
                except PlanError:
                    continue
                assert high > limit, (lay, limit)
        for lay in layouts:  # the stages worked out piecemeal, then completed
            assert floors.canonical(lay) == reference.canonical(lay), lay
            assert floors(lay) == reference(lay), lay
