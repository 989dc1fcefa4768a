"""The search's per-shape bookkeeping (``engine/layout/proofs/regimes.py``): the regimes it
builds once and windows by bisection are exactly those a walk up every candidate DP
finds, and the peak floor over the limit at each batch's largest DP of a shape is over
it at every DP of the shape — the rule by which the search drops a whole shape before
building its regimes (``minimum._Shape.all_over_floor``).

Both checked on random small plans (``layout_plans.search_plans``: held micro-batch or
global batch, HSDP, MoE folding, FSDP padding preferences) over every shape the hard
rules allow; ``test_search_exact.py`` checks the search's answers against brute force.
"""

from __future__ import annotations

from dataclasses import fields as dataclass_fields
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st
from layout_plans import SEARCH_SETTINGS, regime, search_plans

from engine.layout.candidates import (
    RegimeKey,
    dp_candidates,
    layout_at,
    padding_context,
    problems_in,
)
from engine.layout.point import Layout
from engine.layout.proofs.bound import PeakFloors
from engine.layout.proofs.regimes import SearchMemo
from engine.layout.shapes import LayoutPreferences, legal_shapes
from engine.plan import Plan, with_values


def _walk(
    memo: SearchMemo, shape: Layout, top: int, fewest_dp: int
) -> dict[RegimeKey, list[Layout]]:
    """Every candidate DP of ``fewest_dp``…``top`` judged in ascending order, each put in
    its regime unless the padding preference refuses it (the regimes by definition)."""
    plan = memo.plan
    out: dict[RegimeKey, list[Layout]] = {}
    for d in dp_candidates(plan, shape, top, memo.full):
        if d < fewest_dp:
            continue
        lay = layout_at(plan, shape, d)
        if memo.padding < 1 and problems_in(padding_context(plan), lay, memo.padding):
            continue
        out.setdefault(regime(plan, lay), []).append(lay)
    return out


@SEARCH_SETTINGS
@given(
    search_plans(),
    st.sampled_from([1.0, 0.05, 0.01]),
    st.lists(st.integers(1, 16), min_size=1, max_size=4),
    st.integers(1, 3),
)
def test_regime_windows_equal_a_walk(
    case: tuple[Plan, int], padding: float, tops: list[int], fewest_dp: int
) -> None:
    """Asked in any order of tops (growing bounds, then a smaller best cost), the
    regimes, their order and each one's layouts are those of the walk."""
    plan, max_gpus = case
    memo = SearchMemo(plan, full=True, padding=padding)
    for shape in legal_shapes(plan, max_gpus, LayoutPreferences.hard_rules_only()):
        for top in tops:
            got = memo.regimes(shape, top, fewest_dp)
            want = _walk(memo, shape, top, fewest_dp)
            assert list(got) == list(want), (shape, top)
            assert got == want, (shape, top)


@SEARCH_SETTINGS
@given(search_plans(), st.integers(1, 3))
def test_floor_over_at_batch_tops_is_over_at_every_dp(
    case: tuple[Plan, int], fewest_dp: int
) -> None:
    """The floor at each batch's largest candidate DP is at most the floor at every
    smaller candidate DP with that batch, across regimes; so when it is over the limit
    at all of them it is over at every candidate of the shape. The tops asked for are
    exactly each batch's largest candidate (of a walk up the candidates)."""
    plan, max_gpus = case
    floors = PeakFloors(plan)
    memo = SearchMemo(plan, full=True, padding=1.0)
    for shape in legal_shapes(plan, max_gpus, LayoutPreferences.hard_rules_only()):
        top = max_gpus // shape.model_parallel
        tops = {(t.micro_batch, t.grad_accum): t for t in memo.batch_tops(shape, top, fewest_dp)}
        layouts = [
            layout_at(plan, shape, d)
            for d in dp_candidates(plan, shape, top, memo.full)
            if d >= fewest_dp
        ]
        largest_of: dict[tuple[int, int], Layout] = {}
        for lay in layouts:  # ascending DP: the last of each batch stays
            largest_of[lay.micro_batch, lay.grad_accum] = lay
        assert tops == largest_of
        for lay in layouts:
            largest = tops[(lay.micro_batch, lay.grad_accum)]
            assert largest.dp >= lay.dp
            assert floors(lay) >= floors(largest), lay


def test_at_dp_is_replace() -> None:
    """``Layout.at_dp`` builds what ``dataclasses.replace`` would, every other field kept
    (a field added to Layout and not to ``at_dp`` fails here)."""
    shape = Layout(2, 3, 4, 8, 1, micro_batch=2, grad_accum=5, etp=2, pp_split=(3, 4, 3))
    assert shape.at_dp(6, 1, 7) == replace(shape, dp=6, micro_batch=1, grad_accum=7)
    fields = {f.name for f in dataclass_fields(Layout)}
    assert fields == {"tp", "pp", "cp", "ep", "dp", "micro_batch", "grad_accum", "etp", "pp_split"}


@SEARCH_SETTINGS
@given(search_plans(), st.sampled_from(["high", "low"]), st.integers(1, 3))
def test_over_at_top_is_over_at_every_candidate_of_every_ep(
    case: tuple[Plan, int], figure: str, fewest_dp: int
) -> None:
    """With the micro-batch held, the floor over the limit at DP = top proves every
    candidate DP up to top over, at every EP of the (TP, PP, CP, expert TP, split) —
    the rule by which the search drops a MoE model's EP siblings before building their
    candidates (``SearchMemo.over_at_top``) — and never drops a shape the batch tops'
    check keeps. Limits just below and at the floor at each shape's top put the rule
    both ways."""
    plan, max_gpus = case
    plan = with_values(plan, {"batch.hold_fixed": "micro_batch", "batch.global_batch": None})
    floors = PeakFloors(plan)
    shapes = legal_shapes(plan, max_gpus, LayoutPreferences.hard_rules_only())
    limits = {plan.hbm_limit_bytes}
    for shape in shapes:
        top = max_gpus // shape.model_parallel
        value = floors(layout_at(plan, shape, top), figure)
        if value:  # the verdict at the floor's own value, either side
            memo = SearchMemo(plan, full=True, padding=1.0)  # one limit per memo
            assert memo.over_at_top(floors, shape, top, figure, value - 1), shape
            memo = SearchMemo(plan, full=True, padding=1.0)
            assert not memo.over_at_top(floors, shape, top, figure, value), shape
            limits |= {value - 1, value}
    for limit in sorted(limits):
        memo = SearchMemo(plan, full=True, padding=1.0)
        for shape in shapes:
            top = max_gpus // shape.model_parallel
            if not memo.over_at_top(floors, shape, top, figure, limit):
                continue
            for d in dp_candidates(plan, shape, top, memo.full):
                assert floors.over(layout_at(plan, shape, d), limit, figure), (shape, d)
            tops = memo.batch_tops(shape, top, fewest_dp)
            assert all(floors.over(t, limit, figure) for t in tops), shape
