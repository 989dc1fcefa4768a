"""FSDP's reduce-scatter rows worked out once per placement
(:func:`~engine.ledger.peaks.reduce_scatter.regrouped_reduce_scatter_rows`, what a
stage's shared rows use) equal those read from the held tensors at their shard groups
(:func:`~engine.ledger.peaks.reduce_scatter.reduce_scatter_rows`), formulas included,
across shard groups that share one placement (the cache's hits)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from engine.ledger.peaks.reduce_scatter import reduce_scatter_rows, regrouped_reduce_scatter_rows
from engine.ledger.precision import resolve_formats
from engine.ledger.states.persistent import stage_states
from engine.plan import Plan, with_values
from engine.presets import plan_for_model_preset
from engine.stacks.defaults import resolved

STRATEGIES = ["fsdp2", "fsdp2_hsdp", "fsdp1_full_shard", "fsdp1_hybrid_shard"]
LAYOUTS: list[dict[str, Any]] = [
    {"parallelism.dp": dp, "parallelism.ep": ep, "parallelism.pp": pp}
    for dp, ep, pp in itertools.product([2, 8, 24, 64], [1, 8], [1, 4])
]


def _plans(name: str, strategy: str, method: str) -> list[Plan]:
    base = plan_for_model_preset(name)
    out = []
    for layout in LAYOUTS:
        changes = {**layout, "parallelism.strategy": strategy, "method.kind": method}
        try:
            out.append(resolved(with_values(base, changes)))
        except ValueError:
            continue
    return out


@pytest.mark.parametrize("name", ["deepseek-v2-lite", "llama-4-maverick", "gemma-2-2b"])
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("method", ["full", "lora"])
def test_regrouped_rows_equal_the_held_tensors_rows(name: str, strategy: str, method: str) -> None:
    plans = _plans(name, strategy, method)
    assert plans, "no legal layout: the test would compare nothing"
    for plan in plans:
        formats = resolve_formats(plan.method.precision)
        fsdp2 = strategy.startswith("fsdp2")
        for stage in range(plan.parallelism.pp):
            states = stage_states(plan, stage)
            held = list(states.held)
            trainable = [t for t in held if t.trainable]
            if not trainable:
                continue
            shard = max(t.group for t in held)
            want = reduce_scatter_rows(plan, trainable, formats, fsdp2, shard)
            for _ in range(2):  # the cache's miss, then its hit
                got = regrouped_reduce_scatter_rows(
                    plan, held, states.unsharded, formats, fsdp2, shard
                )
                assert got == want, (plan.parallelism, stage)
