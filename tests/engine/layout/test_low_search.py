"""The low search's first bound (``engine/layout/counts.py``) changes no answer.

It bounds the validation-low search by the cheapest layout the high search already
found fitting by the low figure, through a stand-in start one cost unit above it (a
real start would win ties the preference order must decide). Each count — its GPUs,
its layout and its reasons — must be what the search from the plain start gives: on
random small plans and on presets where the bound is below that start.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from layout_plans import PESSIMISTIC, SEARCH_SETTINGS, search_plans

from engine.layout import counts as low_search
from engine.layout.counts import GpuCounts, gpu_counts
from engine.layout.minimum import Cost
from engine.layout.proofs.evaluate import Evaluator, Outcome
from engine.plan import Plan, with_values
from engine.presets import plan_for_model_preset


def _counts(plan: Plan, max_gpus: int, monkeypatch: pytest.MonkeyPatch, bound: bool) -> GpuCounts:
    """The counts with the first bound used or not; the effort line left out (the
    bound exists to need fewer estimates)."""
    with monkeypatch.context() as m:
        if not bound:
            m.setattr(low_search, "cheapest_low_fit", lambda ev, cost: None)
        c = gpu_counts(plan, max_gpus=max_gpus, budget_s=None)
    return replace(c, estimates=0)


@SEARCH_SETTINGS
@given(search_plans())
def test_the_first_bound_changes_no_count(case: tuple[Plan, int]) -> None:
    plan, max_gpus = case
    with pytest.MonkeyPatch.context() as mp:
        assert _counts(plan, max_gpus, mp, True) == _counts(plan, max_gpus, mp, False)


@pytest.mark.parametrize(
    "preset", ["llama-3.1-405b", "llama-4-scout", "llama-4-maverick", "qwen2-57b-a14b"]
)
def test_presets_bounded_below_the_start_keep_their_counts(
    preset: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Presets whose high search estimates a layout fitting by the low figure at fewer
    GPUs than the procurement count (405B: 960 against 2,048), so the bound is used.
    Maverick's and Qwen2-57B's tie with the answer (128 and 24 GPUs) at another layout
    than the preferred one the count names (TP1 CP4 against TP2 CP2): a bound that
    won ties would name the wrong layout."""
    used: list[int] = []
    cheapest = low_search.cheapest_low_fit

    def spy(ev: Evaluator, cost: Cost) -> Outcome | None:
        got = cheapest(ev, cost)
        if got is not None:
            used.append(cost(got.layout.world_size))
        return got

    plan = with_values(plan_for_model_preset(preset), PESSIMISTIC)
    with monkeypatch.context() as m:
        m.setattr(low_search, "cheapest_low_fit", spy)
        bounded = replace(gpu_counts(plan, max_gpus=16384, budget_s=None), estimates=0)
    assert used and used[0] < bounded.first_layout.gpus
    assert bounded == _counts(plan, 16384, monkeypatch, False)
