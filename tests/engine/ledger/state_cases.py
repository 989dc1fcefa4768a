"""What the state-sizing equality tests share (``test_state_sizing``,
``test_one_pass_states``): the layouts their random plans and presets are laid out at,
a random plan laid out at one, and the rows as compared — every field, the formula
written."""

from __future__ import annotations

from typing import Any

from hypothesis import assume

from engine.errors import PlanError
from engine.ledger.row import Row, text
from engine.plan import Plan, with_values

LAYOUTS: list[dict[str, Any]] = [
    {},
    {"parallelism.dp": 6, "parallelism.cp": 2},
    {"parallelism.dp": 3, "parallelism.ep": 4, "parallelism.tp": 2},
    {"parallelism.dp": 16, "parallelism.pp": 2, "parallelism.strategy": "zero3"},
    {"parallelism.dp": 4, "parallelism.strategy": "ddp"},
    {"parallelism.dp": 8, "parallelism.strategy": "fsdp2_hsdp", "parallelism.ep": 2},
    {"parallelism.dp": 5, "parallelism.strategy": "megatron_distopt", "parallelism.ep": 2},
    {"parallelism.dp": 7, "parallelism.pp": 3},
]
"""DP with CP, EP with TP, ZeRO-3 pipelined, DDP, HSDP with EP, Megatron's distributed
optimizer, and an odd DP over three stages (empty and uneven shards)."""


def written(built: list[Row]) -> list[tuple[object, ...]]:
    """The rows with their formulas written, as plain tuples: a lazy formula reads the
    tensors, and tuples compare every field (a row's own equality compares fewer)."""
    return [tuple(r._replace(formula_src=text(r.formula_src))) for r in built]


def laid_out(plan: Plan, layout: dict[str, Any]) -> Plan:
    """``plan`` at ``layout``; a random plan the layout does not fit is not an example."""
    try:
        return with_values(plan, layout)
    except (PlanError, ValueError):
        assume(False)
        raise  # assume(False) raises; this keeps the return type honest
