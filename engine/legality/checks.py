"""A whole plan's legality: every rule of :mod:`~engine.legality.rules` and
:mod:`~engine.legality.offload` on the plan's own layout.

``estimate()`` calls :func:`check`; the GUI marks the fields of each problem. The
load-time rules run here too although a loaded plan already passed them: plans the
layout search derives are built without re-validation.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Final, NamedTuple

from engine.errors import PlanError, Problem
from engine.legality import pipeline_layout, rules
from engine.legality.offload import offload_problems
from engine.legality.stack import dimension_problems, stack_problems
from engine.models.spec import ArchitectureSpec
from engine.plan import Plan
from engine.sections.method import MethodKind
from engine.sections.parallel import Strategy
from engine.sections.stack import ConcreteStack, StackName
from engine.stacks.catalog import concrete_stack

Found = tuple[Problem, ...]


def plan_problems(plan: Plan) -> list[Problem]:
    """Every reason this plan cannot run as laid out; empty when it can.

    The rules come in groups that each read a few fields (one dimension, the pipeline,
    the offload and stack), and each group is cached on exactly the values it is given
    (:data:`_CACHED`): the layout search checks hundreds of layouts, which share their
    TP, their pipeline, their CP and EP, and their DP by the dozen — but hardly ever all
    of them. :func:`rule_problems` runs the same groups uncached."""
    return _problems(plan, _CACHED)


def rule_problems(plan: Plan) -> list[Problem]:
    """:func:`plan_problems` with every rule run afresh: the reference the cached groups
    are tested against."""
    return _problems(plan, _UNCACHED)


def _tp_rules(tp: int, arch: ArchitectureSpec, stack: ConcreteStack, st: Strategy) -> Found:
    return (*rules.tp_problems(tp, arch), *dimension_problems(stack, st, "tp", tp))


def _pp_rules(
    pp: int,
    layout: str | None,
    virtual_stages: int,
    split: rules.Split,
    schedule: str,
    arch: ArchitectureSpec,
    stack: ConcreteStack,
    st: Strategy,
) -> Found:
    problems = pipeline_layout.layout_problems(
        layout, pp, virtual_stages, arch.layers, arch.mtp_layers
    ) or rules.pp_problems(pp, arch.layers, virtual_stages, split, schedule)
    return (*problems, *dimension_problems(stack, st, "pp", pp))


def _cp_ep_rules(
    cp: int, ep: int, arch: ArchitectureSpec, stack: ConcreteStack, st: Strategy
) -> Found:
    return (
        *dimension_problems(stack, st, "cp", cp),
        *rules.ep_problems(ep, arch),
        *dimension_problems(stack, st, "ep", ep),
    )


def _dp_rules(
    dp: int,
    shard_group_size: int | None,
    ep: int,
    expert_tp: int,
    stage_ranks: int,
    arch: ArchitectureSpec,
) -> Found:
    return (
        *rules.dp_problems(dp, shard_group_size),
        *rules.fold_problems(ep, expert_tp, stage_ranks, arch),
    )


def _whole_rules(
    st: Strategy, params: str, optimizer: str, stack: StackName, kind: MethodKind
) -> Found:
    return (*offload_problems(st, params, optimizer), *stack_problems(stack, st, kind))


class _Groups(NamedTuple):
    """The rule groups, in the order their problems come (the CP rule, which reads the
    sequence, after the pipeline's; the batch rule after DP's)."""

    tp: Callable[[int, ArchitectureSpec, ConcreteStack, Strategy], Found]
    pp: Callable[
        [int, str | None, int, rules.Split, str, ArchitectureSpec, ConcreteStack, Strategy], Found
    ]
    cp_ep: Callable[[int, int, ArchitectureSpec, ConcreteStack, Strategy], Found]
    dp: Callable[[int, int | None, int, int, int, ArchitectureSpec], Found]
    whole: Callable[[Strategy, str, str, StackName, MethodKind], Found]


_UNCACHED: Final[_Groups] = _Groups(_tp_rules, _pp_rules, _cp_ep_rules, _dp_rules, _whole_rules)
_CACHED: Final[_Groups] = _Groups(*(lru_cache(maxsize=1024)(g) for g in _UNCACHED))
""":data:`_UNCACHED` each cached on its arguments (plain values and frozen sections: a
group is given nothing else to read, so a cached answer is the group's answer)."""


def _problems(plan: Plan, groups: _Groups) -> list[Problem]:
    """The problems of ``groups`` on ``plan``, with the two rules that read the batch in
    their places: context parallelism against the sequence length, an explicit global
    batch."""
    par, b, arch = plan.parallelism, plan.batch, plan.model.architecture
    st = par.strategy
    stack = concrete_stack(plan.stack.name, st, plan.method.kind)
    # (CP 1 divides every sequence; without a global batch the batch rule has nothing)
    cp = rules.cp_problems(par.cp, b.seq_len) if par.cp > 1 else ()
    batch = (
        rules.batch_problems(b.global_batch, b.micro_batch, b.grad_accum, par.dp)
        if b.global_batch is not None
        else ()
    )
    layers = par.layer_split
    return [
        *groups.tp(par.tp, arch, stack, st),
        *groups.pp(
            par.pp, par.pp_layout, par.virtual_stages, layers, par.pp_schedule, arch, stack, st
        ),
        *cp,
        *groups.cp_ep(par.cp, par.ep, arch, stack, st),
        *groups.dp(par.dp, par.shard_group_size, par.ep, par.expert_tp, par.stage_ranks, arch),
        *batch,
        *groups.whole(
            st, plan.offload.params, plan.offload.optimizer, plan.stack.name, plan.method.kind
        ),
    ]


def check(plan: Plan) -> None:
    """Raise :class:`PlanError` carrying every problem of the plan, if any."""
    problems = plan_problems(plan)
    if problems:
        raise PlanError(problems)
