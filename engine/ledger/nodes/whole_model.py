"""Whole-model state sizes: what one checkpoint holds, independent of the layout.

Computed with the same ledger code as a rank's rows, on a single unsharded "rank" that
holds every tensor, so checkpoint sizes and per-rank rows can never disagree.
"""

from __future__ import annotations

from engine.ledger.placement import layout_memo, place_stage
from engine.ledger.precision import resolve_formats
from engine.ledger.row import CheckpointPart, Row
from engine.ledger.states.allocs import ShardContext
from engine.ledger.states.methods import held_tensors
from engine.ledger.states.quantized import quantized_rows
from engine.ledger.states.rows import persistent_rows
from engine.models.spec import ArchitectureSpec
from engine.sections.method import MethodSection
from engine.sections.parallel import ParallelismSection
from engine.stacks.families import rule_of

_SINGLE = ParallelismSection(dp=1, strategy="ddp")


def _whole(arch: ArchitectureSpec, method: MethodSection) -> tuple[tuple[Row, ...], int]:
    """:func:`_whole_of`, kept in the memo of the single rank's layout."""
    return layout_memo(arch, _SINGLE).get(("whole", method), _whole_of, arch, method)


def _whole_of(arch: ArchitectureSpec, method: MethodSection) -> tuple[tuple[Row, ...], int]:
    """From one pass over every tensor of the model (and its adapters), unsharded: the
    weights, master, gradient and optimizer rows, exact bytes, and the parameters of the
    model itself (adapters excluded)."""
    formats = resolve_formats(method.precision)
    placed = place_stage(arch, _SINGLE, 0)
    held = held_tensors(method, _SINGLE, 1, placed, formats)[0]
    ctx = ShardContext(rule_of(_SINGLE.strategy), "1 (whole model)", 1)
    rows = persistent_rows(held, formats, method.optimizer, ctx)
    if method.kind == "qlora":
        rows[:0] = quantized_rows(held, method.qlora, 1)
    base = sum(t.numel * t.count for t in held if t.category != "adapters")
    return tuple(rows), base


def whole_model_rows(arch: ArchitectureSpec, method: MethodSection) -> tuple[Row, ...]:
    """Weights, master, gradient and optimizer rows of the whole model, exact bytes."""
    return _whole(arch, method)[0]


def whole_bytes(
    arch: ArchitectureSpec, method: MethodSection, parts: frozenset[CheckpointPart]
) -> int:
    """Sum of the whole-model rows that are these parts of a checkpoint."""
    return sum(r.high for r in whole_model_rows(arch, method) if r.checkpoint in parts)


def base_param_count(arch: ArchitectureSpec, method: MethodSection) -> int:
    """Parameters of the model itself (adapters excluded): what loading reads."""
    return _whole(arch, method)[1]
