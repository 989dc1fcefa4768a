"""A whole plan's legality: every rule of :mod:`~engine.legality.rules` and
:mod:`~engine.legality.offload` on the plan's own layout.

``estimate()`` calls :func:`check`; the GUI marks the fields of each problem. The
load-time rules run here too although a loaded plan already passed them: plans the
layout search derives are built without re-validation.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from operator import itemgetter
from typing import Any, Final, NamedTuple

from engine.errors import PlanError, Problem
from engine.legality import pipeline_layout, rules
from engine.legality.offload import offload_problems
from engine.legality.stack import dimension_problems, stack_problems
from engine.models.spec import ArchitectureSpec
from engine.plan import Plan, SectionsKey
from engine.sections.base import Section
from engine.sections.method import MethodKind, MethodSection
from engine.sections.model import ModelSection
from engine.sections.offload import OffloadSection
from engine.sections.parallel import ParallelismSection, Strategy
from engine.sections.stack import ConcreteStack, StackName, StackSection
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


Split = tuple[Found, Found, Found]
"""A plan's problems but the two that read the batch: those before the CP rule (TP,
pipeline), those between it and the batch rule (CP and EP, DP), those after (offload,
stack)."""


def _problems(plan: Plan, groups: _Groups) -> list[Problem]:
    """The problems of ``groups`` on ``plan``, with the two rules that read the batch in
    their places: context parallelism against the sequence length, an explicit global
    batch. The rest read five sections only; cached, they are looked up once for those
    sections' objects (:func:`_sections_problems`: an edit of the batch, or any section
    but these, keeps them), else group by group."""
    fields = plan.__dict__
    if groups is _CACHED:
        key = SectionsKey(_read_sections(fields))
        head, mid, tail = _sections_problems(key)
    else:
        head, mid, tail = _split(*_typed(fields), groups)
    par, b = plan.parallelism, plan.batch
    # (CP 1 divides every sequence; without a global batch the batch rule has nothing)
    cp = rules.cp_problems(par.cp, b.seq_len) if par.cp > 1 else ()
    batch = (
        rules.batch_problems(b.global_batch, b.micro_batch, b.grad_accum, par.dp)
        if b.global_batch is not None
        else ()
    )
    return [*head, *cp, *mid, *batch, *tail]


_READ: Final[tuple[str, ...]] = ("parallelism", "model", "stack", "method", "offload")
"""The sections every rule but the CP and batch rules reads (those read the batch too)."""
_read_sections: Final[Callable[[dict[str, Any]], tuple[Section, ...]]] = itemgetter(*_READ)
"""A plan's :data:`_READ` sections from its fields, read in C (every estimate asks)."""


def _typed(
    fields: dict[str, Any],
) -> tuple[ParallelismSection, ModelSection, StackSection, MethodSection, OffloadSection]:
    return (
        fields["parallelism"],
        fields["model"],
        fields["stack"],
        fields["method"],
        fields["offload"],
    )


@lru_cache(maxsize=1024)
def _sections_problems(key: SectionsKey) -> Split:
    """:func:`_split` of the :data:`_READ` sections in ``key`` (compared by identity:
    the cache holds the sections, so their identities stay theirs)."""
    return _split(*_typed(dict(zip(_READ, key, strict=True))), _CACHED)


def _split(
    par: ParallelismSection,
    model: ModelSection,
    stack_section: StackSection,
    method: MethodSection,
    offload: OffloadSection,
    groups: _Groups,
) -> Split:
    """The problems of ``groups`` on these sections, in :data:`Split`'s three parts."""
    st, arch, kind = par.strategy, model.architecture, method.kind
    stack = concrete_stack(stack_section.name, st, kind)
    head = (
        *groups.tp(par.tp, arch, stack, st),
        *groups.pp(
            par.pp,
            par.pp_layout,
            par.virtual_stages,
            par.layer_split,
            par.pp_schedule,
            arch,
            stack,
            st,
        ),
    )
    mid = (
        *groups.cp_ep(par.cp, par.ep, arch, stack, st),
        *groups.dp(par.dp, par.shard_group_size, par.ep, par.expert_tp, par.stage_ranks, arch),
    )
    return head, mid, groups.whole(st, offload.params, offload.optimizer, stack_section.name, kind)


def check(plan: Plan) -> None:
    """Raise :class:`PlanError` carrying every problem of the plan, if any."""
    problems = _problems(plan, _CACHED)  # plan_problems(plan)
    if problems:
        raise PlanError(problems)
