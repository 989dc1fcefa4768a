"""Persistent model states of one rank: weights, master copy, gradients, optimizer.

These live for the whole step. Each row is the rank's shard summed over its
allocations, each allocation rounded up to the allocator's granularity, because that
is what ``torch.cuda.memory_allocated`` reports (memory-model §1, measured cases).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from math import prod
from operator import attrgetter
from typing import NamedTuple

from engine.ledger.held import HeldTensor
from engine.ledger.precision import DTYPE_BYTES, StateFormats
from engine.ledger.row import (
    ACCUMULATED_MOMENTS,
    ALL_PHASES,
    GRADIENT_MOMENTS,
    STEP_ACCUMULATED_MOMENTS,
    STEP_GRADIENT_MOMENTS,
    CheckpointPart,
    Formula,
    Row,
    make_row,
    moments_in,
    text,
)
from engine.ledger.states.optimizers import OPTIMIZER_LABELS, OPTIMIZER_SOURCES, state_allocs
from engine.sections.method import OptimizerSection
from engine.stacks.families import StrategyRule
from engine.units import ceil_div, fmt_count, round_up


class Alloc(NamedTuple):
    """One allocation of a state on the rank. Build it with :func:`alloc`.

    A named tuple, not a frozen dataclass: an estimate builds hundreds (one per tensor
    and state), and a named tuple is several times cheaper to build."""

    shape: tuple[int, ...]
    count_full: int  # elements before sharding (for the formula)
    dtype: str
    copies: int  # identical allocations this one stands for (folded decoder layers)
    numel: int  # prod(shape)


_new_alloc = partial(tuple.__new__, Alloc)
"""An :class:`Alloc` from its fields in order, built in C (the sharding loop's)."""


def alloc(shape: tuple[int, ...], count_full: int, dtype: str, copies: int = 1) -> Alloc:
    """The one way to build an :class:`Alloc` (its ``numel`` follows from ``shape``)."""
    return Alloc(shape, count_full, dtype, copies, prod(shape))


@dataclass(frozen=True, slots=True)
class ShardContext:
    """How this rank's states are divided, and how to say it."""

    rule: StrategyRule
    group_words: str  # e.g. "8 (data-parallel shard group)"
    granularity: int  # allocator rounding per allocation (bytes)


def shard_allocs(
    tensors: Iterable[HeldTensor],
    sharded: bool,
    rule: StrategyRule,
    dtype_of: str,
    whole_if_persistent: bool = False,
) -> list[Alloc]:
    """The allocations a rank makes for one state of these tensors.

    Unsharded states are one allocation per tensor. Sharded ones follow the strategy's
    chunking: FSDP2 splits dim 0 (rank 0 gets ceil(d0/N) rows); ZeRO-3 partitions each
    tensor to ceil(numel/N) and keeps the partitions in one flat buffer; FSDP1 pads one
    flat buffer per wrap unit; ZeRO-1/2 and Megatron one flat buffer per dtype. Every
    split is padded so rank 0 holds a full chunk.
    ``dtype_of`` names the HeldTensor attribute giving this state's dtype.
    ``whole_if_persistent`` keeps ZeRO-3's persistent (small) parameters unpartitioned:
    it applies to the parameters only; their gradients and optimizer state still shard.
    """
    items = list(tensors)
    dtype_attr = attrgetter(dtype_of)
    if not sharded or rule.chunking == "dim0":
        out = []
        new = _new_alloc
        for t in items:
            n = t.group if sharded and not (whole_if_persistent and t.persistent_full) else 1
            if n == 1:
                out.append(new((t.shape, t.numel, dtype_attr(t), t.count, t.numel)))
            else:
                d0 = t.shape[0]
                rows = -(-d0 // n)  # ceil_div, inlined (hot loop)
                numel = rows * (t.numel // d0) if d0 else 0  # prod of the shard's shape
                out.append(new(((rows, *t.shape[1:]), t.numel, dtype_attr(t), t.count, numel)))
        return out
    # Flat buffers: one allocation per (unit, group, dtype). ZeRO-3 pads each tensor's
    # partition to ceil(numel/N) before concatenating; the others pad the whole buffer.
    # A per-unit buffer of a folded layer stands for ``count`` identical buffers; the
    # single-buffer strategies add every copy's elements into their one buffer.
    per_unit = rule.chunking == "per_unit"
    held: dict[tuple[str, int, str], int] = defaultdict(int)
    full: dict[tuple[str, int, str], int] = defaultdict(int)
    copies: dict[tuple[str, int, str], int] = {}
    for t in items:
        key = (t.unit if per_unit else "all", t.group, dtype_attr(t))
        mult = 1 if per_unit else t.count
        copies[key] = t.count if per_unit else 1
        full[key] += t.numel * mult
        if rule.chunking == "per_tensor":
            keep = whole_if_persistent and t.persistent_full
            held[key] += (t.numel if keep else ceil_div(t.numel, t.group)) * mult
    return [
        alloc(
            (held[key] if rule.chunking == "per_tensor" else ceil_div(total, key[1]),),
            total,
            key[2],
            copies[key],
        )
        for key, total in full.items()
    ]


def _bytes(allocs: list[Alloc], granularity: int) -> int:
    return sum(round_up(a.numel * DTYPE_BYTES[a.dtype], granularity) * a.copies for a in allocs)


def alloc_count(allocs: list[Alloc]) -> int:
    """How many allocations these stand for (folded layers counted out)."""
    return sum(a.copies for a in allocs)


def _formula(allocs: list[Alloc], sharded: bool, ctx: ShardContext, total: int) -> str:
    full = sum(a.count_full * a.copies for a in allocs)
    held = sum(a.numel * a.copies for a in allocs)
    dtypes = sorted({a.dtype for a in allocs})
    per = " + ".join(f"{DTYPE_BYTES[d]} B ({d})" for d in dtypes)
    share = f" ÷ {ctx.group_words} → {fmt_count(held)} held" if sharded else ""
    return (
        f"{fmt_count(full)} elements{share} × {per} in {alloc_count(allocs)} allocation(s), "
        f"each rounded up to {ctx.granularity} B = {fmt_count(total)} B"
    )


def _sized(allocs: list[Alloc], sharded: bool, ctx: ShardContext) -> tuple[int, Formula, str]:
    """(bytes, formula, dtypes) of a state held as these allocations; the formula is
    written when first read (the layout search builds these rows for hundreds of layouts
    and reads none of their formulas)."""
    n = _bytes(allocs, ctx.granularity)
    dtypes = "/".join(sorted({a.dtype for a in allocs}))
    return n, partial(_formula, allocs, sharded, ctx, n), dtypes


_WEIGHTS: dict[str, tuple[str, str, CheckpointPart]] = {
    "model": ("hbm.weights", "Weights", "weights"),
    "frozen": ("hbm.weights.frozen", "Frozen weights", "weights"),
    "adapters": ("hbm.weights.adapters", "LoRA adapter weights", "adapters"),
}
"""Weight category → row id, label, and its part of a checkpoint."""


def weight_rows(held: list[HeldTensor], ctx: ShardContext) -> list[Row]:
    """One weights row per category (trained, frozen, adapters)."""
    rows = []
    for category, (rid, label, part) in _WEIGHTS.items():
        ts = [t for t in held if t.category == category]
        if ts:
            allocs = shard_allocs(
                ts, ctx.rule.params, ctx.rule, "param_dtype", whole_if_persistent=True
            )
            n, formula, dtypes = _sized(allocs, ctx.rule.params, ctx)
            rows.append(
                make_row(
                    id=rid,
                    label=f"{label} ({dtypes})",
                    state="weights",
                    location="hbm",
                    kind="persistent",
                    group="weights",
                    low=n,
                    high=n,
                    formula=formula,
                    source=ctx.rule.source,
                    dtype=dtypes,
                    checkpoint=part,
                )
            )
    return rows


def master_row(trainable: list[HeldTensor], formats: StateFormats, ctx: ShardContext) -> Row:
    """The fp32 master copy that mixed precision keeps of trainable weights."""
    allocs = [
        a._replace(dtype="fp32")
        for a in shard_allocs(trainable, ctx.rule.optimizer, ctx.rule, "param_dtype")
    ]
    n, formula, dtypes = _sized(allocs, ctx.rule.optimizer, ctx)
    return make_row(
        id="hbm.master_weights",
        label="Master weights (fp32)",
        state="master",
        location="hbm",
        kind="persistent",
        group="optimizer",
        low=n,
        high=n,
        formula=formula,
        source="mixed-precision-master",
        dtype=dtypes,
        checkpoint="optimizer",
    )


def _suffixed(formula: Formula, suffix: str) -> str:
    return text(formula) + suffix


def _grad_source(rule: StrategyRule, at_init: bool) -> str:
    if at_init:
        return "deepspeed-zero3-buffers"
    if rule.family == "fsdp1" and rule.shards_nothing:
        return "fsdp1-no-shard"  # all-reduced in place, no bucket copy
    return rule.source


def grads_per_tensor(rule: StrategyRule) -> bool:
    """Whether each gradient is its own allocation, made when backward reaches its
    parameter (unsharded, and FSDP2's per-tensor shards), rather than one flat buffer
    (ZeRO-1/2, FSDP1, Megatron) or ZeRO-3's buffer allocated at init."""
    at_init = rule.family == "deepspeed" and rule.params
    return not at_init and (not rule.grads or rule.chunking == "dim0")


def grad_bytes(trainable: list[HeldTensor], ctx: ShardContext) -> tuple[int, str, str]:
    """(bytes, formula, dtypes) of these tensors' gradients as the rank holds them."""
    n, formula, dtypes = _grad_sized(trainable, ctx)
    return n, text(formula), dtypes


def _grad_sized(trainable: list[HeldTensor], ctx: ShardContext) -> tuple[int, Formula, str]:
    """:func:`grad_bytes` with the formula written when first read."""
    allocs = shard_allocs(trainable, ctx.rule.grads, ctx.rule, "grad_dtype")
    return _sized(allocs, ctx.rule.grads, ctx)


def grad_row(trainable: list[HeldTensor], ctx: ShardContext) -> Row:
    """The rank's gradients: produced during backward, summed across micro-batches.

    ZeRO-3 is the exception: DeepSpeed 0.19.6 stage3.py ``_setup_for_real_optimizer``
    allocates ``grad_partitions_flat_buffer`` (every partition's gradient) at init and
    never frees it, so it is live at every moment of the step."""
    n, formula, dtypes = _grad_sized(trainable, ctx)
    at_init = ctx.rule.family == "deepspeed" and ctx.rule.params
    if at_init:
        formula = partial(_suffixed, formula, " (grad_partitions_flat_buffer, allocated at init)")
    if at_init:
        moments, accumulated = moments_in(ALL_PHASES), ACCUMULATED_MOMENTS
    elif grads_per_tensor(ctx.rule):
        moments, accumulated = STEP_GRADIENT_MOMENTS, STEP_ACCUMULATED_MOMENTS
    else:
        moments, accumulated = GRADIENT_MOMENTS, ACCUMULATED_MOMENTS
    return make_row(
        id="hbm.grads",
        label=f"Gradients ({dtypes})",
        state="grads",
        location="hbm",
        kind="persistent",
        group="gradients",
        low=n,
        high=n,
        formula=formula,
        source=_grad_source(ctx.rule, at_init),
        moments=moments,
        accumulated_moments=accumulated,
        dtype=dtypes,
    )


def main_grad_shard_row(trainable: list[HeldTensor], ctx: ShardContext) -> Row:
    """Megatron's distributed optimizer with 16-bit grads keeps a sharded fp32 copy of
    the main grads for the step (the 20 → 4 + 16/d row of its table). Not checkpointed."""
    allocs = [
        a._replace(dtype="fp32") for a in shard_allocs(trainable, True, ctx.rule, "grad_dtype")
    ]
    n, formula, dtypes = _sized(allocs, True, ctx)
    return make_row(
        id="hbm.optimizer.fp32_grad_shard",
        label="Optimizer: fp32 main-grad shard",
        state="optimizer",
        location="hbm",
        kind="persistent",
        group="optimizer",
        low=n,
        high=n,
        formula=formula,
        source="megatron-distopt",
        dtype=dtypes,
    )


def optimizer_rows(
    trainable: list[HeldTensor], opt: OptimizerSection, ctx: ShardContext
) -> list[Row]:
    """One row per optimizer state (moments, step counters, quantization constants)."""
    allocs = shard_allocs(trainable, ctx.rule.optimizer, ctx.rule, "state_dtype")
    gran = max(ctx.granularity, 1)
    # allocations of one shape and element size have the same states: each is worked
    # out once, for all their copies (first appearances keep the states' order)
    copies: dict[tuple[tuple[int, ...], int], int] = {}
    for a in allocs:
        key = (a.shape, DTYPE_BYTES[a.dtype])
        copies[key] = copies.get(key, 0) + a.copies
    per_state: dict[str, list[int]] = {}  # name → [rounded bytes, raw bytes, allocations]
    for (shape, size), c in copies.items():
        for name, n_bytes in state_allocs(opt, shape, size):
            acc = per_state.get(name)
            if acc is None:
                acc = per_state[name] = [0, 0, 0]
            acc[0] += -(-n_bytes // gran) * gran * c  # round_up, inlined (hot loop)
            acc[1] += n_bytes * c
            acc[2] += c
    rows = []
    share = f", sharded ÷ {ctx.group_words}" if ctx.rule.optimizer else ""
    elements = sum(a.count_full * a.copies for a in allocs)
    for name, (n, raw, allocations) in per_state.items():
        rows.append(
            make_row(
                id=f"hbm.optimizer.{name}",
                label=f"Optimizer: {OPTIMIZER_LABELS.get(name, name)}",
                state="optimizer",
                location="hbm",
                kind="persistent",
                group="optimizer",
                low=n,
                high=n,
                formula=partial(
                    _optimizer_formula, opt.name, name, elements, share, allocations, raw, gran, n
                ),
                source=OPTIMIZER_SOURCES.get(opt.name, "user-input"),
                checkpoint="optimizer",
            )
        )
    return rows


def _optimizer_formula(
    opt: str, name: str, elements: int, share: str, allocations: int, raw: int, gran: int, n: int
) -> str:
    return (
        f"{opt} state '{name}' over {fmt_count(elements)}"
        f" trainable elements{share}: {allocations} allocation(s) totalling "
        f"{fmt_count(raw)} B, each rounded up to {gran} B = {fmt_count(n)} B"
    )


def persistent_rows(
    held: list[HeldTensor],
    formats: StateFormats,
    opt: OptimizerSection,
    ctx: ShardContext,
) -> list[Row]:
    """Weights, master, gradient and optimizer rows for the tensors one rank holds."""
    rows = weight_rows(held, ctx)
    trainable = [t for t in held if t.trainable]
    if not trainable:
        return rows
    if formats.master is not None:
        rows.append(master_row(trainable, formats, ctx))
    rows.append(grad_row(trainable, ctx))
    if (
        ctx.rule.family == "megatron"
        and formats.master is not None
        and any(DTYPE_BYTES[t.grad_dtype] < 4 for t in trainable)
    ):
        rows.append(main_grad_shard_row(trainable, ctx))
    rows.extend(optimizer_rows(trainable, opt, ctx))
    return rows
