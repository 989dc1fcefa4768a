"""The peak floor's verdict (``PeakFloors.over``, ``engine/layout/proofs/bound.py``) that the
search prunes by: worked out stage by stage and stopped at the first stage over the
limit, it says what ``floor > limit`` says wherever the floor is known — by the high
figure (the procurement and arithmetic searches) and the low one (the validation-low
search) — and a canonical plan's stages worked out piecemeal are those worked out at
once.

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
from engine.layout.point import Layout
from engine.layout.proofs.bound import PeakFloors
from engine.layout.shapes import with_layout
from engine.ledger.peaks.runtime import reserve_row
from engine.plan import Plan


def _stage_values(floors: PeakFloors, lay: Layout, figure: str) -> list[int]:
    """Each decisive stage's floor by ``figure`` at ``lay`` (what the floor is the
    largest of): its activations (their peak high, or their largest low of any moment)
    and share of the resident states, the allocator reserve on them and the kept
    runtime."""
    got = floors.canonical(lay)
    if got is None:
        return []
    laid, stages = got
    ranks = lay.world_size // lay.pp
    out = []
    for part in stages:
        share = -(-part.resident // ranks)
        if figure == "high":
            held = part.activations + share
            out.append(held + reserve_row(laid, 0, held).high + part.runtime)
        else:
            held = max(low for low, _ in part.activation_sums) + share
            out.append(held + reserve_row(laid, held, held).low + part.runtime_low)
    return out


@SEARCH_SETTINGS
@given(
    search_plans(),
    st.integers(1, 16),
    st.randoms(use_true_random=False),
    st.sampled_from(["high", "low"]),
)
def test_over_is_the_floor_over_the_limit(
    case: tuple[Plan, int], world: int, rnd: object, figure: str
) -> None:
    plan, _ = case
    layouts = list(legal_layouts(plan, world).legal)
    reference = PeakFloors(plan)
    limits = {0, plan.hbm_limit_bytes}
    for lay in layouts:
        for v in _stage_values(reference, lay, figure):
            limits |= {v - 1, v}
    for limit in sorted(limits):
        floors = PeakFloors(plan)
        order = layouts[:]
        rnd.shuffle(order)  # type: ignore[attr-defined]
        for lay in order:
            value = reference(lay, figure)
            if value:
                assert value == max(_stage_values(reference, lay, figure)), lay
            over = floors.over(lay, limit, figure)
            if value:
                assert over == (value > limit), (lay, limit)
            if over:
                try:
                    peak = estimate(with_layout(plan, lay), decisive_only=True).fit_peak
                except PlanError:
                    continue
                assert (peak.high if figure == "high" else peak.low) > limit, (lay, limit)
        for lay in layouts:  # the stages worked out piecemeal, then completed
            assert floors.canonical(lay) == reference.canonical(lay), lay
            assert floors(lay, figure) == reference(lay, figure), lay
