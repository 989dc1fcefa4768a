"""The bounds the search prunes by (``engine/layout/proofs/bound.py``, ``low_bound.py``,
``state_bound.py``, the floor of ``floor.py``) change no count on real models.

A caller's estimator turns every bound off (they know only the ledger's rows, see
``engine.layout.proofs.evaluate.Evaluator``): the search then estimates each regime's probes
and takes nothing on trust but the DP regimes themselves. On a sample of presets — dense
and MoE, FSDP2, DDP, ZeRO and Megatron — the three counts and their layouts equal that
unpruned search's, to 1,024 GPUs.
"""

from __future__ import annotations

import pytest

from engine.estimate import Estimate, estimate
from engine.layout.counts import GpuCounts, gpu_counts
from engine.plan import Plan, with_values
from engine.presets import plan_for_model_preset

CASES: list[tuple[str, dict[str, object]]] = [
    ("llama-3.1-70b", {}),
    ("mixtral-8x7b", {}),
    ("qwen1.5-moe-a2.7b", {}),
    ("qwen2-57b-a14b", {}),
    ("deepseek-v2-lite", {"parallelism.strategy": "megatron_distopt", "batch.grad_accum": 8}),
    ("gemma-2-9b", {"parallelism.strategy": "ddp"}),
    ("llama-3.1-8b", {"parallelism.strategy": "zero3"}),
]


def _unpruned(plan: Plan) -> Estimate:
    return estimate(plan, decisive_only=True)


def _answer(c: GpuCounts) -> tuple[object, ...]:
    return tuple(
        (k.gpus, k.layout)
        for k in (c.arithmetic_min, c.first_layout, c.validation_low, c.validation_high)
    )


@pytest.mark.parametrize(("name", "changes"), CASES)
def test_counts_equal_the_unpruned_search(name: str, changes: dict[str, object]) -> None:
    plan = with_values(plan_for_model_preset(name), changes)
    pruned = gpu_counts(plan, max_gpus=1024, budget_s=None)
    unpruned = gpu_counts(plan, max_gpus=1024, estimator=_unpruned, budget_s=None)
    assert _answer(pruned) == _answer(unpruned)
    assert pruned.estimates < unpruned.estimates  # the bounds did prune something
