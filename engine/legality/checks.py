"""A whole plan's legality: every rule of :mod:`~engine.legality.rules` and
:mod:`~engine.legality.offload` on the plan's own layout.

``estimate()`` calls :func:`check`; the GUI marks the fields of each problem. The
load-time rules run here too although a loaded plan already passed them: plans the
layout search derives are built without re-validation.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from engine.errors import PlanError, Problem
from engine.ledger.shape_free import shape_free
from engine.legality import pipeline_layout, rules
from engine.legality.offload import offload_problems
from engine.legality.stack import dimension_problems, stack_problems
from engine.plan import Plan
from engine.stacks.catalog import concrete_stack


def plan_problems(plan: Plan) -> list[Problem]:
    """Every reason this plan cannot run as laid out; empty when it can.

    Only two rules read the batch (context parallelism against the sequence length, an
    explicit global batch); the others run once per shape-free plan
    (:func:`_batchless_problems`, cached) and every problem keeps its place."""
    par, b = plan.parallelism, plan.batch
    before, between, after = _batchless_problems(shape_free(plan))
    # (CP 1 divides every sequence; without a global batch the batch rule has nothing)
    cp = rules.cp_problems(par.cp, b.seq_len) if par.cp > 1 else ()
    batch = (
        rules.batch_problems(b.global_batch, b.micro_batch, b.grad_accum, par.dp)
        if b.global_batch is not None
        else ()
    )
    return [*before, *cp, *between, *batch, *after]


class _Batchless(NamedTuple):
    """The problems of the rules that do not read the batch, in their places around the
    two that do: before the context-parallel rule, between it and the batch rule,
    after the batch rule."""

    before: tuple[Problem, ...]
    between: tuple[Problem, ...]
    after: tuple[Problem, ...]


@lru_cache(maxsize=256)
def _batchless_problems(plan: Plan) -> _Batchless:
    """:class:`_Batchless` of a shape-free plan (run on it: a rule here that read the
    batch would be wrong at once)."""
    par, arch = plan.parallelism, plan.model.architecture
    layout = pipeline_layout.layout_problems(
        par.pp_layout, par.pp, par.virtual_stages, arch.layers, arch.mtp_layers
    )
    pipeline = layout or rules.pp_problems(
        par.pp, arch.layers, par.virtual_stages, par.layer_split, par.pp_schedule
    )
    st = par.strategy
    stack = concrete_stack(plan.stack.name, st, plan.method.kind)
    return _Batchless(
        (
            *rules.tp_problems(par.tp, arch),
            *dimension_problems(stack, st, "tp", par.tp),
            *pipeline,
            *dimension_problems(stack, st, "pp", par.pp),
        ),
        (
            *dimension_problems(stack, st, "cp", par.cp),
            *rules.ep_problems(par.ep, arch),
            *dimension_problems(stack, st, "ep", par.ep),
            *rules.dp_problems(par.dp, par.shard_group_size),
            *rules.fold_problems(par.ep, par.expert_tp, par.stage_ranks, arch),
        ),
        (
            *offload_problems(par.strategy, plan.offload.params, plan.offload.optimizer),
            *stack_problems(plan.stack.name, par.strategy, plan.method.kind),
        ),
    )


def check(plan: Plan) -> None:
    """Raise :class:`PlanError` carrying every problem of the plan, if any."""
    problems = plan_problems(plan)
    if problems:
        raise PlanError(problems)
