"""States sized in one pass over the tensors must not change a byte or a word.

Where every state is one allocation per tensor, :func:`engine.ledger.states.rows.
persistent_rows` sizes them all in one pass (:mod:`engine.ledger.states.one_pass`).
Here its rows — ids, labels, bytes, moments, formulas — are compared with those of
:func:`~engine.ledger.states.rows.persistent_rows_by_state`, the state-by-state sizing
it replaced, on random plans and on the presets at several layouts, methods,
optimizers, precisions and granularities (and every stage, so ZeRO-3's persistent
parameters, frozen and adapter weights and empty shards all occur). The elements of a
rank's optimizer shard and parameters (the node ledgers') are compared likewise with
their sum over every allocation.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from engine.errors import PlanError
from engine.ledger.held import HeldTensor
from engine.ledger.placement import dense_dp_group, expert_dp_group
from engine.ledger.precision import resolve_formats
from engine.ledger.sharding import shard_group_size
from engine.ledger.states import one_pass
from engine.ledger.states.allocs import ShardContext, shard_allocs
from engine.ledger.states.persistent import stage_held, stage_shard_elems, stage_states
from engine.ledger.states.rows import (
    folded_states,
    persistent_rows,
    persistent_rows_by_state,
    regrouped_persistent_rows,
)
from engine.plan import Plan, with_values
from engine.presets import plan_for_model_preset
from engine.stacks.defaults import resolved
from tests.engine.ledger.state_cases import LAYOUTS, laid_out, written
from tests.fuzz.plans import plans


def _shard_elems_by_allocs(held: list[HeldTensor], ctx: ShardContext) -> tuple[int, int]:
    """:func:`stage_shard_elems` summed over every allocation :func:`shard_allocs` makes
    (what it did before summing one-per-tensor shards straight from the tensors)."""
    trainable = [t for t in held if t.trainable]
    rule = ctx.rule
    opt = sum(
        a.numel * a.copies for a in shard_allocs(trainable, rule.optimizer, rule, "state_dtype")
    )
    params = sum(a.numel * a.copies for a in shard_allocs(held, rule.params, rule, "param_dtype"))
    return opt, params


def _assert_same(plan: Plan) -> int:
    """Compare both sizings on every stage; how many stages the one pass sized."""
    try:
        r = resolved(plan)
        helds = [stage_held(r, s) for s in range(r.parallelism.pp)]
    except (PlanError, NotImplementedError, ValueError):
        assume(False)
        return 0
    formats, opt = resolve_formats(r.method.precision), r.method.optimizer
    par = r.parallelism
    rpn = par.ranks_per_node or r.hardware.gpus_per_node
    dense = shard_group_size(par, dense_dp_group(par), rpn)
    expert = shard_group_size(par, expert_dp_group(par), rpn)
    for stage, (held, ctx) in enumerate(helds):
        assert stage_shard_elems(r, stage) == _shard_elems_by_allocs(list(held), ctx)
        fast = persistent_rows(list(held), formats, opt, ctx)
        slow = persistent_rows_by_state(list(held), formats, opt, ctx)
        assert written(fast) == written(slow)
        folded = folded_states(stage_states(r, stage).unsharded)
        regrouped = regrouped_persistent_rows(folded, dense, expert, held, formats, opt, ctx)
        assert written(regrouped) == written(slow)
    return sum(one_pass.applies(ctx) for _, ctx in helds)


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(plans(), st.sampled_from(LAYOUTS))
def test_one_pass_on_random_plans(plan: Plan, layout: dict[str, Any]) -> None:
    _assert_same(laid_out(plan, layout))


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.sampled_from(
        ["deepseek-v3", "llama-4-maverick", "mixtral-8x7b", "llama-3.1-8b", "gemma-2-2b"]
    ),
    st.sampled_from(LAYOUTS),
    st.sampled_from(["full", "lora", "qlora", "custom"]),
    st.sampled_from(["adamw", "adam8bit", "adafactor", "sgd_momentum", "lion", "sgd"]),
    st.sampled_from([1, 512, 4096]),
    st.sampled_from(["auto", "amp_master", "autocast", "pure_16bit"]),
)
def test_one_pass_on_presets(
    name: str, layout: dict[str, Any], kind: str, opt: str, gran: int, policy: str
) -> None:
    changes = {
        **layout,
        "method.kind": kind,
        "method.optimizer.name": opt,
        "runtime.allocation_granularity_bytes": gran,
        "method.precision.policy": policy,
    }
    if kind == "custom":
        changes["method.custom.roles"] = ["q", "expert_up"]
    try:
        plan = with_values(plan_for_model_preset(name), changes)
    except (PlanError, ValueError):
        assume(False)
    _assert_same(plan)


def test_one_pass_sizes_the_search_default() -> None:
    """The search's plans (FSDP2) are sized in one pass, and alike."""
    for name in ("deepseek-v3", "llama-3.1-8b"):
        for layout in ({}, {"parallelism.dp": 6}, {"parallelism.dp": 3, "parallelism.pp": 2}):
            assert _assert_same(with_values(plan_for_model_preset(name), layout)) > 0
