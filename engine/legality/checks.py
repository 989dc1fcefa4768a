"""A whole plan's legality: every rule of :mod:`~engine.legality.rules` and
:mod:`~engine.legality.offload` on the plan's own layout.

``estimate()`` calls :func:`check`; the GUI marks the fields of each problem. The
load-time rules run here too although a loaded plan already passed them: plans the
layout search derives are built without re-validation.
"""

from __future__ import annotations

from engine.errors import PlanError, Problem
from engine.legality import rules
from engine.legality.offload import offload_problems
from engine.legality.stack import stack_problems
from engine.plan import Plan


def plan_problems(plan: Plan) -> list[Problem]:
    """Every reason this plan cannot run as laid out; empty when it can."""
    par, arch, b = plan.parallelism, plan.model.architecture, plan.batch
    return [
        *rules.tp_problems(par.tp, arch),
        *rules.pp_problems(
            par.pp, arch.layers, par.virtual_stages, par.pp_layer_split, par.pp_schedule
        ),
        *rules.cp_problems(par.cp, b.seq_len),
        *rules.ep_problems(par.ep, arch),
        *rules.dp_problems(par.dp, par.shard_group_size),
        *rules.batch_problems(b.global_batch, b.micro_batch, b.grad_accum, par.dp * par.ep),
        *offload_problems(par.strategy, plan.offload.params, plan.offload.optimizer),
        *stack_problems(plan.stack.name, par.strategy, plan.method.kind),
    ]


def check(plan: Plan) -> None:
    """Raise :class:`PlanError` carrying every problem of the plan, if any."""
    problems = plan_problems(plan)
    if problems:
        raise PlanError(problems)
