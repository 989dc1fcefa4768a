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
from engine.ledger.held import HeldTensor, recounted, regrouped, regrouped_from, regrouping
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
        cut = regrouped_from(regrouping(held), 3, 5)
        assert cut == regrouped(held, 3, 5)
        assert [(t.group, type(t)) for t in cut] == [
            (5 if t.expert else 3, HeldTensor) for t in held
        ]


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


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.sampled_from(["deepseek-v3", "llama-4-maverick", "llama-3.1-8b"]),
    st.sampled_from(LAYOUTS),
    st.sampled_from(["pure_16bit", "amp_master", "autocast"]),
)
def test_full_training_holds_each_placed_tensor_as_built_field_by_field(
    name: str, layout: dict[str, Any], policy: str
) -> None:
    """Full training's held tensors (built in C from the placed ones) equal each placed
    tensor held through :class:`HeldTensor`'s own constructor (the reference), and a
    held tensor recounted in C equals ``_replace(count=…)``."""
    try:
        r = resolved(
            with_values(plan_for_model_preset(name), {**layout, "method.precision.policy": policy})
        )
    except (PlanError, ValueError):
        assume(False)
        return
    formats = resolve_formats(r.method.precision)
    par = r.parallelism
    threshold = par.knobs.ds_param_persistence_threshold if par.strategy == "zero3" else 0
    for s in range(par.pp):
        placed = stage_placed(r, s)
        held, _ = held_tensors(r.method, par, 0, placed, formats, (3, 5))
        for t, h in zip(placed, held, strict=True):
            dtype = "fp32" if t.tensor.keep_fp32 and formats.master is None else formats.param
            ref = HeldTensor(
                name=t.tensor.name,
                shape=t.shape,
                unit=f"layer.{t.tensor.layer}" if t.tensor.layer is not None else "root",
                category="frozen" if t.tensor.buffer else "model",
                trainable=not t.tensor.buffer,
                param_dtype=dtype,
                grad_dtype=formats.grad_dtype_for(dtype),
                state_dtype=formats.state_dtype_for(dtype),
                group=5 if t.expert else 3,
                persistent_full=0 < t.tensor.numel < threshold,
                count=t.count,
                expert=t.expert,
            )
            assert h == ref and type(h) is HeldTensor
            assert recounted(h, h.count + 2) == h._replace(count=h.count + 2)
