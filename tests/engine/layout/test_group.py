"""A regime's candidate layouts read through a view of its DP values
(``engine/layout/lattice/group.py``) are those of the list the view stands for, and the search
reads the same answers through views as through lists.

Views are what the search gets for a regime longer than ``regimes.LISTED`` (a dense
model's thousands of DP values); the random small plans' regimes are shorter, so the
second test makes every regime a view (``LISTED = 0``) and compares whole answers.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from layout_plans import SEARCH_SETTINGS, search_plans

from engine.layout.lattice.group import Group, below_dp, dp_span
from engine.layout.lattice.point import Layout
from engine.layout.proofs import regimes
from engine.layout.proofs.regimes import Known
from engine.layout.search.counts import gpu_counts
from engine.plan import Plan

SHAPE = Layout(tp=2, pp=1, cp=1, ep=1, dp=1, micro_batch=2, grad_accum=3)


def _make(dp: int) -> Layout:
    return SHAPE.at_dp(dp, 2, 3)


ends = st.one_of(st.none(), st.integers(-12, 12))


@given(
    st.lists(st.integers(1, 60), unique=True, max_size=12).map(sorted),
    st.integers(0, 12),
    st.integers(0, 12),
    st.lists(st.tuples(ends, ends), max_size=4),
    st.integers(0, 62),
    st.one_of(st.none(), st.integers(0, 62)),
)
def test_a_view_reads_as_its_list(
    dps: list[int],
    lo: int,
    span: int,
    slices: list[tuple[int | None, int | None]],
    dp: int,
    upto: int | None,
) -> None:
    lo = min(lo, len(dps))
    hi = min(len(dps), lo + span)
    view: object = Group(dps, lo, hi, _make)
    want = [_make(d) for d in dps[lo:hi]]
    for a, b in [(None, None), *slices]:  # slices of slices, as the bisection takes them
        assert isinstance(view, Group)
        assert view == want and len(view) == len(want) and bool(view) == bool(want)
        assert list(view) == want and view.dps() == [x.dp for x in want]
        for i in range(-len(want), len(want)):
            assert view[i] == want[i]
        assert below_dp(view, dp) == below_dp(want, dp)
        assert dp_span(view, dp, upto) == dp_span(want, dp, upto)
        view, want = view[a:b], want[a:b]


@given(
    st.lists(st.integers(1, 60), unique=True, min_size=1, max_size=12).map(sorted),
    st.integers(0, 62),
    st.one_of(st.none(), st.integers(0, 62)),
    st.one_of(st.none(), st.integers(0, 11)),
)
def test_known_reads_a_view_as_its_list(
    dps: list[int], dead: int, fits: int | None, found: int | None
) -> None:
    view, listed = Group(dps, 0, len(dps), _make), [_make(d) for d in dps]
    a, b = Known(dead, fits), Known(dead, fits)
    assert a.unknown(view) == b.unknown(listed)
    at = None if found is None else listed[found % len(listed)]
    a.learn(view, at)
    b.learn(listed, at)
    assert a == b


@SEARCH_SETTINGS
@given(search_plans())
def test_the_search_answers_alike_through_views(case: tuple[Plan, int]) -> None:
    """Every regime read through a view: the same counts, layouts, reasons, alternatives
    and estimates as through lists."""
    plan, max_gpus = case
    listed = regimes.LISTED
    regimes._shape_points.cache_clear()
    want = gpu_counts(plan, max_gpus=max_gpus, budget_s=None)
    try:
        regimes.LISTED = 0
        regimes._shape_points.cache_clear()
        got = gpu_counts(plan, max_gpus=max_gpus, budget_s=None)
    finally:
        regimes.LISTED = listed
        regimes._shape_points.cache_clear()
    assert got == want
