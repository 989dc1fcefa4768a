"""A state's allocations on one rank, and their bytes and formula.

Each state (weights, master copy, gradients, optimizer state, the optimizer step's
temporaries) is held as allocations of the rank's shard of its tensors
(:func:`shard_allocs`), each rounded up to the allocator's granularity, because that is
what ``torch.cuda.memory_allocated`` reports (memory-model §1, measured cases).

When every tensor is its own allocation — an unsharded state, or FSDP2's dim-0 shards —
a state's allocations differ from another's only in their dtype, and their bytes are a
sum over the tensors: :func:`state_sized` then sums them straight from the tensors (the
layout search sizes thousands of states, and reads none of their formulas) and builds
the allocations only when the formula is read. ``tests/engine/ledger/
test_state_sizing.py`` compares both ways on varied plans.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from math import prod
from operator import attrgetter
from typing import NamedTuple

from engine.ledger.held import HeldTensor
from engine.ledger.precision import DTYPE_BYTES
from engine.ledger.row import Formula
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
    no_sync: bool = False  # parallelism.knobs.accumulate_without_sync


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


def alloc_bytes(allocs: list[Alloc], granularity: int) -> int:
    """The allocations' bytes, each rounded up to the granularity, copies counted out."""
    return sum(round_up(a.numel * DTYPE_BYTES[a.dtype], granularity) * a.copies for a in allocs)


def alloc_count(allocs: list[Alloc]) -> int:
    """How many allocations these stand for (folded layers counted out)."""
    return sum(a.copies for a in allocs)


def alloc_formula(allocs: list[Alloc], sharded: bool, ctx: ShardContext, total: int) -> str:
    """The formula of a state held as these allocations, ``total`` bytes in all."""
    full = sum(a.count_full * a.copies for a in allocs)
    held = sum(a.numel * a.copies for a in allocs)
    dtypes = sorted({a.dtype for a in allocs})
    per = " + ".join(f"{DTYPE_BYTES[d]} B ({d})" for d in dtypes)
    share = f" ÷ {ctx.group_words} → {fmt_count(held)} held" if sharded else ""
    return (
        f"{fmt_count(full)} elements{share} × {per} in {alloc_count(allocs)} allocation(s), "
        f"each rounded up to {ctx.granularity} B = {fmt_count(total)} B"
    )


def sized(allocs: list[Alloc], sharded: bool, ctx: ShardContext) -> tuple[int, Formula, str]:
    """(bytes, formula, dtypes) of a state held as these allocations; the formula is
    written when first read (the layout search builds these rows for hundreds of layouts
    and reads none of their formulas)."""
    n = alloc_bytes(allocs, ctx.granularity)
    dtypes = "/".join(sorted({a.dtype for a in allocs}))
    return n, partial(alloc_formula, allocs, sharded, ctx, n), dtypes


def one_per_tensor(rule: StrategyRule, sharded: bool) -> bool:
    """Whether each tensor of a state is one allocation of its own (unsharded, or FSDP2's
    dim-0 shards) rather than part of a flat buffer: :func:`shard_allocs`' first branch."""
    return not sharded or rule.chunking == "dim0"


def shard_numel(t: HeldTensor, sharded: bool, whole_if_persistent: bool = False) -> int:
    """Elements of the rank's allocation of ``t`` when each tensor is its own allocation
    (:func:`one_per_tensor`): :func:`shard_allocs`' ``numel`` there."""
    n = t.group if sharded and not (whole_if_persistent and t.persistent_full) else 1
    if n == 1:
        return t.numel
    d0 = t.shape[0]
    return -(-d0 // n) * (t.numel // d0) if d0 else 0


def state_sized(
    tensors: Sequence[HeldTensor],
    sharded: bool,
    ctx: ShardContext,
    dtype_of: str,
    whole_if_persistent: bool = False,
    as_dtype: str | None = None,
) -> tuple[int, Formula, str]:
    """:func:`sized` of the state of these tensors :func:`shard_allocs` gives (its
    allocations cast to ``as_dtype`` when given): (bytes, formula, dtypes). With one
    allocation per tensor the bytes are summed from the tensors themselves and the
    allocations built when the formula is read; otherwise from the allocations."""
    if not one_per_tensor(ctx.rule, sharded):
        allocs = _cast(tensors, sharded, ctx, dtype_of, whole_if_persistent, as_dtype)
        return sized(allocs, sharded, ctx)
    gran = ctx.granularity if ctx.granularity > 1 else 1  # round_up's rule
    total = 0
    seen: set[str] = set()
    dtype_attr = attrgetter(dtype_of)
    for t in tensors:  # shard_numel and round_up inlined (the search's hottest loop)
        n = t.group if sharded and not (whole_if_persistent and t.persistent_full) else 1
        if n == 1:
            numel = t.numel
        else:
            d0 = t.shape[0]
            numel = -(-d0 // n) * (t.numel // d0) if d0 else 0
        d = as_dtype or dtype_attr(t)
        seen.add(d)
        total += -(-numel * DTYPE_BYTES[d] // gran) * t.count
    total *= gran
    dtypes = "/".join(sorted(seen))
    formula = lazy_formula(
        tuple(tensors), sharded, ctx, dtype_of, whole_if_persistent, as_dtype, total
    )
    return total, formula, dtypes


def lazy_formula(
    tensors: tuple[HeldTensor, ...],
    sharded: bool,
    ctx: ShardContext,
    dtype_of: str,
    whole_if_persistent: bool,
    as_dtype: str | None,
    total: int,
) -> Formula:
    """The formula of :func:`state_sized`'s state of these tensors, ``total`` bytes,
    written when read (from the allocations :func:`shard_allocs` makes)."""
    return partial(
        _lazy_formula, tensors, sharded, ctx, dtype_of, whole_if_persistent, as_dtype, total
    )


def _lazy_formula(
    tensors: tuple[HeldTensor, ...],
    sharded: bool,
    ctx: ShardContext,
    dtype_of: str,
    whole_if_persistent: bool,
    as_dtype: str | None,
    total: int,
) -> str:
    """:func:`state_sized`'s formula, from the allocations :func:`shard_allocs` makes."""
    allocs = _cast(tensors, sharded, ctx, dtype_of, whole_if_persistent, as_dtype)
    return alloc_formula(allocs, sharded, ctx, total)


def _cast(
    tensors: Sequence[HeldTensor],
    sharded: bool,
    ctx: ShardContext,
    dtype_of: str,
    whole_if_persistent: bool,
    as_dtype: str | None,
) -> list[Alloc]:
    """:func:`shard_allocs` of the state, its allocations cast to ``as_dtype`` if given."""
    allocs = shard_allocs(tensors, sharded, ctx.rule, dtype_of, whole_if_persistent)
    return allocs if as_dtype is None else [a._replace(dtype=as_dtype) for a in allocs]
