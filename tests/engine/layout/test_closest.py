"""The closest layout a "no layout fits" reason names (``engine/layout/beside.py``).

The walk estimates only the candidates — every relaxed shape at the largest DP of each
regime — whose lower bound (peak floor, then state bound) is below the closest found so
far. Its closest must be as close as estimating every candidate would give (brute force,
on the random small plans of ``test_search_exact``), and a real no-fit plan's reason
must name a layout it estimated, with a small share of the estimates the former replay
of the whole search made.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from layout_plans import PESSIMISTIC, SEARCH_SETTINGS, search_plans

from engine.layout import beside as closest_module
from engine.layout.beside import closeness, closest_candidates
from engine.layout.counts import gpu_counts
from engine.layout.point import Layout
from engine.layout.proofs.evaluate import Budget, Evaluator, Outcome
from engine.layout.proofs.regimes import SearchMemo
from engine.layout.shapes import LayoutPreferences, legal_shapes
from engine.plan import Plan, with_values
from engine.presets import plan_for_model_preset


def _candidates(plan: Plan, max_gpus: int) -> list[Layout]:
    """Every candidate of the walk: each relaxed shape at each regime's largest DP."""
    prefs = LayoutPreferences()
    memo = SearchMemo(plan, prefs.pipeline_full, prefs.max_padding_share)
    fewest = Evaluator(plan).fewest_ranks
    out = []
    for shape in legal_shapes(plan, max_gpus, prefs.relaxed()):
        m = shape.model_parallel
        if m <= max_gpus:
            regimes = memo.regimes(shape, max_gpus // m, -(-fewest // m))
            out += [group[-1] for group in regimes.values()]
    return out


def _closest_of(outcomes: list[Outcome]) -> Outcome | None:
    return max((o for o in outcomes if o.ok and not o.fits_high), key=closeness, default=None)


def _key(o: Outcome | None) -> tuple[bool, int] | None:
    return None if o is None else closeness(o)


@SEARCH_SETTINGS
@given(search_plans())
def test_the_walk_finds_the_closest_of_every_candidate(case: tuple[Plan, int]) -> None:
    """The walk's closest is as close as the closest of every candidate estimated (node
    ledgers fitting first, then headroom; ties may name another layout of equal rank),
    and it is one of the candidates it estimated."""
    plan, max_gpus = case
    prefs = LayoutPreferences()
    ev = Evaluator(plan)
    memo = SearchMemo(plan, prefs.pipeline_full, prefs.max_padding_share)
    relaxed = legal_shapes(plan, max_gpus, prefs.relaxed())
    assert closest_candidates(ev, memo, relaxed, max_gpus, Budget(None))
    brute = Evaluator(plan)
    every = [brute(lay) for lay in _candidates(plan, max_gpus)]
    walked = _closest_of(ev.outcomes)
    assert _key(walked) == _key(_closest_of(every))
    assert walked is None or walked in every
    assert ev.calls <= len(every)


def test_a_no_fit_reason_names_a_layout_it_estimated_with_few_estimates() -> None:
    """Llama-3.1-405B at micro-batch 2 fits nowhere up to 16,384 GPUs; the search itself
    estimates only the plan's own TP 1 layout (the peak floor proves every shape over
    without one). The reason names TP8 PP16 CP4 DP32 at 127.80 GB (127.74 before the two
    32 MiB cuBLAS workspaces became allocated bytes): the closest layout a
    stack can run — TP stays within the 8-GPU node even for the arithmetic minimum
    (``LayoutPreferences.relaxed``; it named TP64 PP16 CP4 DP4 at 105.98 GB when TP could
    cross nodes) — and that is the walk's estimate of it, found with far fewer estimates
    than there are candidates."""
    plan = with_values(
        plan_for_model_preset("llama-3.1-405b"), {"batch.micro_batch": 2, **PESSIMISTIC}
    )
    c = gpu_counts(plan, max_gpus=16384, budget_s=None)
    assert c.first_layout.gpus is None and c.arithmetic_min.gpus is None
    named = c.first_layout.outcome
    assert named is not None and named.layout.label().startswith("TP8 PP16 [7,8×14,7] CP4")
    assert named == Evaluator(plan)(named.layout)  # an estimate, not a bound
    assert named.layout in _candidates(plan, 16384)
    reason = c.first_layout.reason
    assert "the closest (of the search's estimates and every shape's largest DP per " in reason
    assert f"{named.layout.label()}, needs 127.80 GB" in reason
    assert c.arithmetic_min.outcome == named and c.validation_low.outcome == named
    assert c.estimates * 10 < len(_candidates(plan, 16384))


def test_the_walk_stops_at_its_estimates_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    """Capped at two new estimates (the 405B plan above needs eight), the walk stops and
    the reason says only that its closest is the closest estimated."""
    monkeypatch.setattr(closest_module, "MOST_ESTIMATES", 2)
    plan = with_values(
        plan_for_model_preset("llama-3.1-405b"), {"batch.micro_batch": 2, **PESSIMISTIC}
    )
    c = gpu_counts(plan, max_gpus=16384, budget_s=None)
    assert c.first_layout.gpus is None and not c.stopped
    assert "; the closest estimated, " in c.first_layout.reason
    assert c.estimates == 1 + 2  # the plan's own layout, then the walk's two
