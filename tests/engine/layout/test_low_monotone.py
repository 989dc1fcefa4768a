"""The low fit peak never falls with fewer data-parallel ranks within a regime (beyond
the FSDP padding slack): what every proof by the low figure rests on — a layout that
fails by it at a regime's DP fails at each smaller DP of the regime
(``minimum.Criterion.all_below_fail``, the low bound's regime rule, what one search's
estimates teach the other).

It holds because the low figure is the largest low of any phase of any stage
(:func:`engine.ledger.phases.peak_phase_of`, :func:`engine.estimate.fit_range`), each
of which only grows as the states do. Taken at the phase peaking by the high figure, as
it was, it fell: Llama-3.2-1B under ZeRO-1 with SGD momentum (whose step temporaries'
low is 0), full recompute and 128-token sequences peaks by the high figure at backward
with 14 ranks and at the optimizer step with 13, whose low is 0.3 GB smaller — so a
failure at DP 14 proved nothing about DP 13, and the validation-low count missed such
layouts.
"""

from __future__ import annotations

from hypothesis import given
from layout_plans import SEARCH_SETTINGS, search_plans

from engine.layout.point import LayoutPreferences
from engine.layout.proofs.evaluate import Evaluator, slack
from engine.layout.proofs.regimes import SearchMemo
from engine.layout.shapes import legal_shapes
from engine.plan import Plan, with_values
from engine.presets import plan_for_model_preset


def _falls(plan: Plan, max_gpus: int, figure: str = "low") -> tuple[int, list[str]]:
    """(pairs compared, the pairs of one regime where a smaller DP's ``figure`` is below a
    larger DP's by more than the larger's slack for that figure)."""
    ev = Evaluator(plan)
    memo = SearchMemo(plan, full=False, padding=1.0)
    compared, falls = 0, []
    for shape in legal_shapes(plan, max_gpus, LayoutPreferences.hard_rules_only()):
        for group in memo.regimes(shape, max_gpus // shape.model_parallel, 1).values():
            outs = [o for o in map(ev, group) if o.ok]
            for i, small in enumerate(outs):
                for large in outs[i + 1 :]:
                    compared += 1
                    less = getattr(small, figure) < getattr(large, figure) - slack(
                        plan, large, figure
                    )
                    if less:
                        falls.append(f"{large.layout.label()} → {small.layout.label()}")
    return compared, falls


def test_sgd_momentum_zero1_low_never_falls() -> None:
    """The case above, every regime of up to 16 GPUs on one-GPU nodes (TP 1), PP 1."""
    plan = with_values(
        plan_for_model_preset("llama-3.2-1b"),
        {
            "batch.seq_len": 128,
            "method.recompute.policy": "full",
            "method.optimizer.name": "sgd_momentum",
            "method.optimizer.implementation": "foreach",
            "parallelism.strategy": "zero1",
            "hardware.gpus_per_node": 1,
            "policy.max_pp": 1,
        },
    )
    compared, falls = _falls(plan, 16)
    assert compared > 50
    assert not falls, falls[:5]


@SEARCH_SETTINGS
@given(search_plans())
def test_low_never_falls_with_fewer_ranks(case: tuple[Plan, int]) -> None:
    plan, max_gpus = case
    assert not _falls(plan, max_gpus)[1]


@SEARCH_SETTINGS
@given(search_plans())
def test_high_never_falls_with_fewer_ranks(case: tuple[Plan, int]) -> None:
    """The same of the high figure, which the high search's proofs rest on."""
    plan, max_gpus = case
    assert not _falls(plan, max_gpus, "high")[1]
