"""The alternatives a count ranks (``engine/layout/beside.py``) are those of
estimating every legal layout of the procurement size: skipping the layouts whose peak
floor is over the limit (:mod:`engine.layout.proofs.bound`) drops only layouts that fail by the
high estimate — which alone ranks the fitting ones — and none the estimate refuses; and
the layouts memory rules out ("why doesn't it fit") are the same either way."""

from __future__ import annotations

import pytest

from engine.layout.beside import (
    ALTERNATIVES_EVALUATED,
    ALTERNATIVES_SHOWN,
    ranked_alternatives,
)
from engine.layout.counts import gpu_counts
from engine.layout.minimum import Found
from engine.layout.proofs.evaluate import Evaluator, Outcome
from engine.layout.shapes import LayoutPreferences, Rejected, enumerate_layouts
from engine.plan import Plan, with_values
from engine.presets import plan_for_model_preset


def _every_layout(
    ev: Evaluator, first: Found, max_gpus: int, prefs: LayoutPreferences
) -> tuple[tuple[Outcome, ...], tuple[Rejected, ...]]:
    """The ranking with every legal layout estimated (the floor consulted for none)."""
    lattice = enumerate_layouts(ev.plan, min(first.cost, max_gpus), prefs)
    outs = [ev(lay) for lay in lattice.legal[:ALTERNATIVES_EVALUATED]]
    fitting = [o for o in outs if o.fits_high and o.layout != first.outcome.layout]
    fitting.sort(key=lambda o: (-o.headroom, o.layout.preference()))
    failed = [Rejected(o.layout, (f"estimate refused it: {o.error}",)) for o in outs if not o.ok]
    over = [Rejected(o.layout, ("memory",)) for o in outs if o.ok and not o.fits_high]
    return tuple(fitting[:ALTERNATIVES_SHOWN]), (*lattice.rejected, *failed, *over)


def _split(rejected: tuple[Rejected, ...]) -> tuple[tuple[Rejected, ...], frozenset[object]]:
    """The rejections by rule, and the layouts memory rules out (by the estimate or, in
    the ranking, by the peak floor alone: their words differ, the layouts do not)."""
    memory = frozenset(r.layout for r in rejected if r.reasons[0].startswith("memory"))
    return tuple(r for r in rejected if r.layout not in memory), memory


PLANS = [
    ("mixtral-8x22b", {}),
    ("deepseek-v2-lite", {}),
    ("llama-3.1-70b", {"parallelism.strategy": "megatron_distopt", "batch.grad_accum": 8}),
    ("llama-3.1-8b", {"parallelism.strategy": "ddp"}),
]


@pytest.mark.parametrize(("preset", "changes"), PLANS, ids=[p for p, _ in PLANS])
def test_alternatives_are_every_layouts(preset: str, changes: dict[str, object]) -> None:
    plan: Plan = with_values(plan_for_model_preset(preset), changes)
    counts = gpu_counts(plan, max_gpus=1024, budget_s=None)
    assert counts.first_layout.layout is not None and counts.first_layout.outcome is not None
    first = Found(counts.first_layout.outcome, counts.first_layout.gpus or 0)
    prefs = LayoutPreferences()
    skipping = Evaluator(plan)
    got = ranked_alternatives(skipping, first, 1024, prefs)
    everything = Evaluator(plan)
    ref = _every_layout(everything, first, 1024, prefs)
    assert got[0] == ref[0] and _split(got[1]) == _split(ref[1])
    assert _split(got[1])[1], "memory rules some layout of the procurement size out"
    assert (got[0], counts.rejected) == (counts.alternatives, got[1])
    if preset == "mixtral-8x22b":  # 112 GPUs: most of its first 16 legal layouts are
        assert skipping.calls < everything.calls  # over their peak floor: not estimated
