"""Rows worked out once per placement from the held tensors before their shard groups
(what a stage's shared rows use) equal those read from the held tensors at their groups,
formulas included, across shard groups that share one placement (the caches' hits):
FSDP's reduce-scatter rows
(:func:`~engine.ledger.peaks.reduce_scatter.regrouped_reduce_scatter_rows` against
:func:`~engine.ledger.peaks.reduce_scatter.reduce_scatter_rows`) and the optimizer step's
temporaries (:func:`~engine.ledger.peaks.optimizer_step.optimizer_temp_rows` with and
without ``unsharded``)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from engine.ledger.peaks.optimizer_step import optimizer_temp_rows
from engine.ledger.peaks.reduce_scatter import reduce_scatter_rows, regrouped_reduce_scatter_rows
from engine.ledger.precision import resolve_formats
from engine.ledger.states.persistent import stage_states
from engine.plan import Plan, with_values
from engine.presets import plan_for_model_preset
from engine.stacks.defaults import resolved
from engine.stacks.families import rule_of

MODELS = ["deepseek-v2-lite", "llama-4-maverick", "gemma-2-2b"]
LAYOUTS: list[dict[str, Any]] = [
    {"parallelism.dp": dp, "parallelism.ep": ep, "parallelism.pp": pp}
    for dp, ep, pp in itertools.product([2, 8, 24, 64], [1, 8], [1, 4])
]


def _plans(name: str, changes: dict[str, Any]) -> list[Plan]:
    base = plan_for_model_preset(name)
    out = []
    for layout in LAYOUTS:
        try:
            out.append(resolved(with_values(base, {**layout, **changes})))
        except ValueError:
            continue
    assert out, "no legal layout: the test would compare nothing"
    return out


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize(
    "strategy", ["fsdp2", "fsdp2_hsdp", "fsdp1_full_shard", "fsdp1_hybrid_shard"]
)
@pytest.mark.parametrize("method", ["full", "lora"])
def test_regrouped_reduce_scatter_rows(name: str, strategy: str, method: str) -> None:
    for plan in _plans(name, {"parallelism.strategy": strategy, "method.kind": method}):
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


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("strategy", ["fsdp2", "ddp", "zero1", "fsdp1_full_shard"])
@pytest.mark.parametrize("implementation", ["foreach", "for_loop"])
@pytest.mark.parametrize("optimizer", ["adamw", "lion"])
def test_regrouped_optimizer_temp_rows(
    name: str, strategy: str, implementation: str, optimizer: str
) -> None:
    changes = {
        "parallelism.strategy": strategy,
        "method.optimizer.implementation": implementation,
        "method.optimizer.name": optimizer,
    }
    for plan in _plans(name, changes):
        rule = rule_of(plan.parallelism.strategy)
        for stage in range(plan.parallelism.pp):
            states = stage_states(plan, stage)
            held = list(states.held)
            want = optimizer_temp_rows(plan, held, rule)
            for _ in range(2):  # the cache's miss, then its hit
                got = optimizer_temp_rows(plan, held, rule, states.unsharded)
                assert got == want, (plan.parallelism, stage)
