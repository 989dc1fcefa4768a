"""A pipeline stage's persistent rows: placement → method → states.

Cached on exactly the sections that decide them (frozen, hashable), because the layout
search and the GUI re-estimate plans that differ only in batch, runtime or policy; and
per *kind* of stage (:func:`engine.ledger.placement.representative_stages`): stages
placing the same tensors share one computation.
"""

from __future__ import annotations

from functools import lru_cache

from engine.ledger.held import HeldTensor
from engine.ledger.placement import LocalTensor, place_stage, representative_stages
from engine.ledger.precision import resolve_formats
from engine.ledger.row import Row
from engine.ledger.states.methods import held_tensors
from engine.ledger.states.offload import offloads_nothing, split_offload
from engine.ledger.states.quantized import quantized_rows
from engine.ledger.states.rows import ShardContext, persistent_rows, shard_allocs
from engine.models.spec import ArchitectureSpec
from engine.plan import Plan
from engine.sections.method import MethodSection
from engine.sections.parallel import ParallelismSection
from engine.stacks.families import rule_of


@lru_cache(maxsize=1024)
def _held(
    arch: ArchitectureSpec,
    method: MethodSection,
    par: ParallelismSection,
    ranks_per_node: int,
    granularity: int,
    stage: int,
) -> tuple[tuple[HeldTensor, ...], ShardContext]:
    formats = resolve_formats(method.precision)
    placed = _placed(arch, par, stage)
    held, words = held_tensors(method, par, ranks_per_node, placed, formats)
    return tuple(held), ShardContext(rule_of(par.strategy), words, granularity)


def _key(
    plan: Plan, stage: int
) -> tuple[ArchitectureSpec, MethodSection, ParallelismSection, int, int, int]:
    par, arch = plan.parallelism, plan.model.architecture
    return (
        arch,
        plan.method,
        par,
        par.ranks_per_node or plan.hardware.gpus_per_node,
        plan.runtime.allocation_granularity_bytes,
        representative_stages(arch, par)[stage],
    )


def stage_held(plan: Plan, stage: int) -> tuple[tuple[HeldTensor, ...], ShardContext]:
    """The tensors one rank of a stage holds, and how its states are sharded."""
    return _held(*_key(plan, stage))


@lru_cache(maxsize=1024)
def _rows(
    arch: ArchitectureSpec,
    method: MethodSection,
    par: ParallelismSection,
    ranks_per_node: int,
    granularity: int,
    stage: int,
) -> tuple[Row, ...]:
    held, ctx = _held(arch, method, par, ranks_per_node, granularity, stage)
    rows = persistent_rows(list(held), resolve_formats(method.precision), method.optimizer, ctx)
    if method.kind == "qlora":
        rows[:0] = quantized_rows(list(held), method.qlora, granularity)
    return tuple(rows)


def all_state_rows(plan: Plan, stage: int) -> list[Row]:
    """Every persistent state of one rank of ``stage`` as if nothing were offloaded."""
    return list(_rows(*_key(plan, stage)))


def _split(plan: Plan, stage: int) -> tuple[list[Row], list[Row]]:
    rows = all_state_rows(plan, stage)
    if offloads_nothing(plan):
        return rows, []  # the common case, without looking the held tensors up again
    return split_offload(rows, plan, list(stage_held(plan, stage)[0]))


def persistent_stage_rows(plan: Plan, stage: int) -> list[Row]:
    """Weights, master copy, gradients and optimizer state that stay in HBM (with the
    GPU buffers an offload path keeps)."""
    return _split(plan, stage)[0]


def offloaded_stage_rows(plan: Plan, stage: int) -> list[Row]:
    """The same states moved to host RAM or NVMe by the offload settings, and the
    buffers the offload path adds there (per rank)."""
    return _split(plan, stage)[1]


@lru_cache(maxsize=1024)
def _shard_elems(
    arch: ArchitectureSpec,
    method: MethodSection,
    par: ParallelismSection,
    ranks_per_node: int,
    granularity: int,
    stage: int,
) -> tuple[int, int]:
    held, ctx = _held(arch, method, par, ranks_per_node, granularity, stage)
    trainable = [t for t in held if t.trainable]
    opt = sum(
        a.numel * a.copies
        for a in shard_allocs(trainable, ctx.rule.optimizer, ctx.rule, "state_dtype")
    )
    params = sum(
        a.numel * a.copies
        for a in shard_allocs(list(held), ctx.rule.params, ctx.rule, "param_dtype")
    )
    return opt, params


def stage_shard_elems(plan: Plan, stage: int) -> tuple[int, int]:
    """(trainable elements in one rank's optimizer shard, parameter elements it holds)."""
    return _shard_elems(*_key(plan, stage))


@lru_cache(maxsize=1024)
def _placed(arch: ArchitectureSpec, par: ParallelismSection, stage: int) -> tuple[LocalTensor, ...]:
    return place_stage(arch, par, stage)


def stage_placed(plan: Plan, stage: int) -> tuple[LocalTensor, ...]:
    """The local (TP / EP placed) tensors one rank of ``stage`` holds, cached."""
    arch, par = plan.model.architecture, plan.parallelism
    return _placed(arch, par, representative_stages(arch, par)[stage])
