"""A pipeline stage's persistent rows: placement → method → states."""

from __future__ import annotations

from engine.ledger.held import HeldTensor
from engine.ledger.methods import held_tensors
from engine.ledger.placement import place_stage
from engine.ledger.precision import resolve_formats
from engine.ledger.quantized import quantized_rows
from engine.ledger.row import Row
from engine.ledger.sharding import RULES
from engine.ledger.states import ShardContext, persistent_rows
from engine.models.inventory import build_inventory
from engine.plan import Plan


def stage_held(plan: Plan, stage: int) -> tuple[list[HeldTensor], ShardContext]:
    """The tensors one rank of a stage holds, and how its states are sharded."""
    arch, par = plan.model.architecture, plan.parallelism
    formats = resolve_formats(plan.method.precision)
    placed = place_stage(build_inventory(arch), arch, par, stage)
    held, words = held_tensors(plan, placed, formats)
    ctx = ShardContext(RULES[par.strategy], words, plan.runtime.allocation_granularity_bytes)
    return held, ctx


def persistent_stage_rows(plan: Plan, stage: int) -> list[Row]:
    """Weights, master copy, gradients and optimizer state of one rank of ``stage``."""
    held, ctx = stage_held(plan, stage)
    formats = resolve_formats(plan.method.precision)
    rows = persistent_rows(held, formats, plan.method.optimizer, ctx)
    if plan.method.kind == "qlora":
        rows[:0] = quantized_rows(held, plan.method.qlora, ctx.granularity)
    return rows
