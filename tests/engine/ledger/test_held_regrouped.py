"""A stage's held tensors built once per placement and regrouped for each shard group
size (:func:`engine.ledger.states.persistent.stage_held`, :func:`engine.ledger.held.
regrouped`) equal those built directly at the plan's own groups
(:func:`engine.ledger.states.methods.held_tensors` reading the parallelism): the same
tensors, dtypes, trainability, groups and divisor words, on random plans and presets at
several layouts."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from engine.errors import PlanError
from engine.ledger.precision import resolve_formats
from engine.ledger.states.methods import held_tensors
from engine.ledger.states.persistent import stage_held, stage_placed
from engine.plan import Plan, with_values
from engine.presets import plan_for_model_preset
from engine.stacks.defaults import resolved
from tests.fuzz.plans import plans

LAYOUTS: list[dict[str, Any]] = [
    {},
    {"parallelism.dp": 6, "parallelism.cp": 2},
    {"parallelism.dp": 3, "parallelism.ep": 4, "parallelism.tp": 2},
    {"parallelism.dp": 16, "parallelism.pp": 2, "parallelism.strategy": "zero3"},
    {"parallelism.dp": 5, "parallelism.strategy": "megatron_distopt", "parallelism.ep": 2},
]


def _assert_same(plan: Plan) -> None:
    try:
        r = resolved(plan)
        stages = range(r.parallelism.pp)
        direct = [
            held_tensors(
                r.method,
                r.parallelism,
                r.parallelism.ranks_per_node or r.hardware.gpus_per_node,
                stage_placed(r, s),
                resolve_formats(r.method.precision),
            )
            for s in stages
        ]
    except (PlanError, NotImplementedError, ValueError):
        assume(False)
        return
    for s, (held, words) in zip(stages, direct, strict=True):
        got, ctx = stage_held(r, s)
        assert list(got) == held
        assert [t.group for t in got] == [t.group for t in held]
        assert ctx.group_words == words


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(plans(), st.sampled_from(LAYOUTS))
def test_regrouped_equals_direct_on_random_plans(plan: Plan, layout: dict[str, Any]) -> None:
    try:
        plan = with_values(plan, layout)
    except (PlanError, ValueError):
        assume(False)
    _assert_same(plan)


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.sampled_from(["deepseek-v3", "llama-4-maverick", "mixtral-8x7b", "qwen2-57b-a14b"]),
    st.sampled_from(LAYOUTS),
    st.sampled_from(["full", "lora", "qlora"]),
)
def test_regrouped_equals_direct_on_presets(name: str, layout: dict[str, Any], kind: str) -> None:
    try:
        plan = with_values(plan_for_model_preset(name), {**layout, "method.kind": kind})
    except (PlanError, ValueError):
        assume(False)
    _assert_same(plan)
