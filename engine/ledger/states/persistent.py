"""A pipeline stage's persistent rows: placement → method → states.

Cached on exactly what decides them (frozen, hashable: :func:`_key`), because the
layout search and the GUI re-estimate plans that differ only in batch, runtime, policy
or DP; and per *kind* of stage (:func:`engine.ledger.placement.representative_stages`): stages
placing the same tensors share one computation.
"""

from __future__ import annotations

from typing import NamedTuple

from engine.ledger.held import HeldTensor, Regrouping, regrouped_from, regrouping
from engine.ledger.placement import (
    LocalTensor,
    dense_dp_group,
    expert_dp_group,
    layout_memo,
    place_stage,
    representative_stages,
)
from engine.ledger.precision import resolve_formats
from engine.ledger.row import Row
from engine.ledger.sharding import shard_group_size
from engine.ledger.states import one_pass
from engine.ledger.states.allocs import ShardContext, one_per_tensor, shard_allocs, shard_numel
from engine.ledger.states.methods import group_words_of, held_tensors
from engine.ledger.states.offload import offloads_nothing, split_offload
from engine.ledger.states.one_pass import Folded
from engine.ledger.states.quantized import quantized_rows
from engine.ledger.states.rows import folded_states, regrouped_persistent_rows
from engine.models.spec import ArchitectureSpec
from engine.plan import Plan
from engine.sections.method import MethodSection
from engine.sections.parallel import ParallelismSection
from engine.stacks.families import StrategyRule, stack_rule_of

Key = tuple[ArchitectureSpec, MethodSection, ParallelismSection, int, int, int, int, StrategyRule]
"""What a stage's states read (:func:`_key`): the architecture, the method, the
parallelism without its DP and CP (:func:`placing_parallelism`), the dense and expert shard group
sizes, the allocator granularity, the representative stage and the strategy's rule as
the plan's stack runs it (:func:`~engine.stacks.families.stack_rule_of`: Megatron-Core's
``ddp`` keeps its grad buffer)."""


_PLACINGS: dict[tuple[object, ...], ParallelismSection] = {}
"""One placing parallelism (:func:`placing_parallelism`) per value of the fields it keeps."""

_KEPT = tuple(f for f in ParallelismSection.model_fields if f not in ("dp", "cp"))
"""The parallelism's fields but DP and CP: what a placing parallelism is made of."""


def placing_parallelism(par: ParallelismSection) -> ParallelismSection:
    """``par`` at DP 1 and CP 1. Placement reads neither (CP splits tokens, not weights),
    and the states read them only through the shard group sizes, which :func:`_key`
    carries: the layout search's DP values (and CP values of one dense group) of a shape
    then share one placement and one set of rows. Computed *at* DP 1 and CP 1, not merely
    keyed on them, a placement that did read either would be wrong at once, in every
    golden plan with DP or CP above one.

    Looked up by the other fields' values, so every parallelism of one placing gets the
    very same object: the caches keyed on it then hit by identity, and a layout search
    (a new parallelism per layout) makes one copy per shape, not one per layout."""
    d = par.__dict__
    key = tuple([d[f] for f in _KEPT])
    got = _PLACINGS.get(key)
    if got is None:
        if par.dp == 1 and par.cp == 1:
            got = par
        else:
            out = par.model_copy(update={"dp": 1, "cp": 1})
            assert isinstance(out, ParallelismSection)
            got = out
        if len(_PLACINGS) >= 1024:
            _PLACINGS.clear()
        _PLACINGS[key] = got
    return got


class _Placement(NamedTuple):
    """What a placement's states read for every shard group size: its held tensors at
    shard groups of one, the same cut for :func:`~engine.ledger.held.regrouped_from`,
    whether any placed tensor is a routed expert's (the divisor's words), and the
    unsharded tensors folded for :func:`regrouped_persistent_rows` (the layout search
    sizes a placement's states at several shard group sizes)."""

    unsharded: tuple[HeldTensor, ...]
    parts: Regrouping
    experts: bool
    folded: Folded | None


def _placement(
    arch: ArchitectureSpec, method: MethodSection, par: ParallelismSection, stage: int
) -> _Placement:
    """The stage's :class:`_Placement`: what its held tensors are, their dtypes and
    trainability read no group size, so :func:`_states` regroups them for each. Kept in
    the layout's memo (:func:`~engine.ledger.placement.layout_memo`)."""
    memo = layout_memo(arch, par)
    return memo.get(("placement", method, stage), _placement_of, arch, method, par, stage)


def _placement_of(
    arch: ArchitectureSpec, method: MethodSection, par: ParallelismSection, stage: int
) -> _Placement:
    formats = resolve_formats(method.precision)
    placed = _placed(arch, par, stage)
    unsharded = tuple(held_tensors(method, par, 0, placed, formats, (1, 1))[0])
    experts = any([t.expert for t in placed])
    return _Placement(unsharded, regrouping(unsharded), experts, folded_states(unsharded))


class _States(NamedTuple):
    """A stage's states at one pair of shard group sizes (:func:`_states`): the held
    tensors, their sharding and every persistent state's row."""

    held: tuple[HeldTensor, ...]
    ctx: ShardContext
    rows: tuple[Row, ...]


def _key(plan: Plan, stage: int) -> Key:
    par, arch = plan.parallelism, plan.model.architecture
    rpn = par.ranks_per_node or plan.hardware.gpus_per_node
    placing = placing_parallelism(par)
    return (
        arch,
        plan.method,
        placing,
        shard_group_size(par, dense_dp_group(par), rpn),
        shard_group_size(par, expert_dp_group(par), rpn),
        plan.runtime.allocation_granularity_bytes,
        representative_stages(arch, placing)[stage],
        stack_rule_of(par.strategy, plan.stack.name),
    )


def stage_held(plan: Plan, stage: int) -> tuple[tuple[HeldTensor, ...], ShardContext]:
    """The tensors one rank of a stage holds, and how its states are sharded."""
    got = _states(_key(plan, stage))
    return got.held, got.ctx


def _states(key: Key) -> _States:
    """The :class:`_States` of the stage whose :func:`_key` is ``key``: its placement's
    tensors regrouped for the key's dense and expert shard groups, and their rows (kept
    in the layout's memo)."""
    return layout_memo(key[0], key[2]).get(key, _states_of, *key)


def _states_of(
    arch: ArchitectureSpec,
    method: MethodSection,
    par: ParallelismSection,
    dense: int,
    expert: int,
    granularity: int,
    stage: int,
    rule: StrategyRule,
) -> _States:
    at = _placement(arch, method, par, stage)
    held = tuple(regrouped_from(at.parts, dense, expert))
    no_sync = par.knobs.accumulate_without_sync
    ctx = ShardContext(rule, group_words_of(at.experts, dense, expert), granularity, no_sync)
    formats = resolve_formats(method.precision)
    folded = at.folded if one_pass.applies(ctx) else None
    rows = regrouped_persistent_rows(folded, dense, expert, held, formats, method.optimizer, ctx)
    if method.kind == "qlora":
        rows[:0] = quantized_rows(list(held), method.qlora, granularity, ctx)
    return _States(held, ctx, tuple(rows))


def all_state_rows(plan: Plan, stage: int) -> list[Row]:
    """Every persistent state of one rank of ``stage`` as if nothing were offloaded."""
    return list(_states(_key(plan, stage)).rows)


def _split(plan: Plan, stage: int) -> tuple[list[Row], list[Row]]:
    return _split_at(plan, _key(plan, stage))


def _split_at(plan: Plan, key: Key) -> tuple[list[Row], list[Row]]:
    """(the states that stay in HBM, those the offload settings move) of the stage whose
    :func:`_key` is ``key``."""
    got = _states(key)
    rows = list(got.rows)
    if offloads_nothing(plan):
        return rows, []  # the common case
    return split_offload(rows, plan, list(got.held))


def persistent_stage_rows(plan: Plan, stage: int) -> list[Row]:
    """Weights, master copy, gradients and optimizer state that stay in HBM (with the
    GPU buffers an offload path keeps)."""
    return _split(plan, stage)[0]


class StageStates(NamedTuple):
    """What a stage's shared rows read of its states, looked up with one key: the
    placed tensors (:func:`stage_placed`), the held ones and their sharding
    (:func:`stage_held`), the states that stay in HBM (:func:`persistent_stage_rows`), and
    the held tensors before their shard groups (what FSDP's reduce-scatter rows read once
    per placement: :func:`engine.ledger.peaks.buckets.bucket_rows`)."""

    placed: tuple[LocalTensor, ...]
    held: tuple[HeldTensor, ...]
    ctx: ShardContext
    hbm: list[Row]
    unsharded: tuple[HeldTensor, ...]  # ``held`` at shard groups of one (cached)


def stage_states(plan: Plan, stage: int) -> StageStates:
    """:func:`stage_placed`, :func:`stage_held` and :func:`persistent_stage_rows` of
    ``stage`` at once (each works :func:`_key` out anew)."""
    return _states_at(plan, _key(plan, stage))


def stage_states_at(plan: Plan, stage: int, dense: int, expert: int) -> StageStates:
    """:func:`stage_states` of ``stage`` with its dense and routed-expert tensors sharded
    over ``dense`` and ``expert`` ranks, whatever the plan's DP and CP (which the states
    read only through these): what a plan at DP 1 and CP 1 shares with every plan of its
    placement (:mod:`engine.ledger.stage_shared`)."""
    par, arch = plan.parallelism, plan.model.architecture
    placing = placing_parallelism(par)
    gran = plan.runtime.allocation_granularity_bytes
    rep = representative_stages(arch, placing)[stage]
    rule = stack_rule_of(par.strategy, plan.stack.name)
    return _states_at(plan, (arch, plan.method, placing, dense, expert, gran, rep, rule))


def _states_at(plan: Plan, key: Key) -> StageStates:
    got = _states(key)
    arch, method, par, stage = key[0], key[1], key[2], key[6]
    return StageStates(
        _placed(arch, par, stage),
        got.held,
        got.ctx,
        _split_at(plan, key)[0],
        _placement(arch, method, par, stage).unsharded,
    )


def offloaded_stage_rows(plan: Plan, stage: int) -> list[Row]:
    """The same states moved to host RAM or NVMe by the offload settings, and the
    buffers the offload path adds there (per rank)."""
    return _split(plan, stage)[1]


def _shard_elems(key: Key) -> tuple[int, int]:
    got = _states(key)
    trainable = [t for t in got.held if t.trainable]
    opt = _elems(trainable, got.ctx.rule.optimizer, got.ctx, "state_dtype")
    return opt, _elems(list(got.held), got.ctx.rule.params, got.ctx, "param_dtype")


def _elems(tensors: list[HeldTensor], sharded: bool, ctx: ShardContext, dtype_of: str) -> int:
    """Elements of the rank's allocations of one state of ``tensors`` (folded copies
    counted out): summed from the tensors' shards where each is its own allocation
    (:func:`~engine.ledger.states.allocs.shard_numel`), else from the flat buffers."""
    if one_per_tensor(ctx.rule, sharded):
        return sum([shard_numel(t, sharded) * t.count for t in tensors])
    return sum(a.numel * a.copies for a in shard_allocs(tensors, sharded, ctx.rule, dtype_of))


def stage_shard_elems(plan: Plan, stage: int) -> tuple[int, int]:
    """(trainable elements in one rank's optimizer shard, parameter elements it holds)."""
    return _shard_elems(_key(plan, stage))


def _placed(arch: ArchitectureSpec, par: ParallelismSection, stage: int) -> tuple[LocalTensor, ...]:
    return layout_memo(arch, par).get(("placed", stage), place_stage, arch, par, stage)


def stage_placed(plan: Plan, stage: int) -> tuple[LocalTensor, ...]:
    """The local (TP / EP placed) tensors one rank of ``stage`` holds, cached on the
    parallelism without its DP and CP (:func:`placing_parallelism`)."""
    arch, par = plan.model.architecture, placing_parallelism(plan.parallelism)
    return _placed(arch, par, representative_stages(arch, par)[stage])
