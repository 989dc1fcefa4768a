"""A rank's persistent states sized in one pass over its tensors.

When every state is held as one allocation per tensor (nothing sharded, or FSDP2's
dim-0 shards: :func:`~engine.ledger.states.allocs.one_per_tensor` for the parameters,
the gradients and the optimizer alike), each state's bytes are a sum over the tensors
of the rank's shard of each, and the shard of a tensor is the same for every state
sharded over its group. :func:`sized_at_once` works each tensor's shard out once and
adds it into every state it belongs to — the weights of its category, the master copy,
the gradients, the optimizer's allocation shapes — instead of one pass per state
(:func:`~engine.ledger.states.allocs.state_sized` for each, then the optimizer's): the
layout search sizes the states of a thousand layouts, and reads none of their formulas.

The numbers and the formulas (written when read, from the same arguments
:func:`~engine.ledger.states.allocs.state_sized` gives them) are those of the state
by state sizing; ``tests/engine/ledger/test_one_pass_states.py`` compares the rows of
both, formula text included, on random plans and the presets.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

from engine.ledger.held import HeldTensor
from engine.ledger.precision import DTYPE_BYTES
from engine.ledger.row import Formula, text
from engine.ledger.states.allocs import ShardContext, lazy_formula, one_per_tensor


class Sized(NamedTuple):
    """One state's (bytes, formula, dtypes), as :func:`state_sized` gives them."""

    n: int
    formula: Formula
    dtypes: str


class AtOnce(NamedTuple):
    """Every persistent state of the tensors, sized in one pass: the weights of each
    category asked for that has tensors (in the order asked), whether any tensor is
    trainable, the master copy (None without one), the gradients, and the optimizer's
    allocations — identical allocations by (shape, element size), in first-appearance
    order, with how many of each — and the trainable elements."""

    weights: list[tuple[str, Sized]]
    trainable: bool
    master: Sized | None
    grads: Sized
    copies: dict[tuple[tuple[int, ...], int], int]
    elements: int


def applies(ctx: ShardContext) -> bool:
    """Whether :func:`sized_at_once` sizes this rank's states: every state one allocation
    per tensor, and no Megatron main-grad shard (sized as a flat buffer)."""
    rule = ctx.rule
    return (
        rule.family != "megatron"
        and one_per_tensor(rule, rule.params)
        and one_per_tensor(rule, rule.grads)
        and one_per_tensor(rule, rule.optimizer)
    )


def sized_at_once(
    held: list[HeldTensor], master: bool, ctx: ShardContext, categories: tuple[str, ...]
) -> AtOnce:
    """The states of ``held`` (when :func:`applies`), ``master``: whether mixed precision
    keeps an fp32 master copy; the weights of ``categories`` (those with a weights row,
    in the rows' order). Each tensor is unpacked once and its shard worked out once; the
    dtypes (few, and all a label needs) are collected after the pass, and the tensors of
    each state only when its formula is read."""
    rule = ctx.rule
    p_sh, g_sh, o_sh = rule.params, rule.grads, rule.optimizer
    gran = ctx.granularity if ctx.granularity > 1 else 1  # round_up's rule
    size = DTYPE_BYTES
    weights: dict[str, int] = {}  # category → allocation bytes ÷ gran
    wget = weights.get
    trains = False
    m_total = g_total = elements = 0
    copies: dict[tuple[tuple[int, ...], int], int] = {}
    get = copies.get
    # shard_numel and round_up inlined: the fields in HeldTensor's order
    for _, shape, _, cat, trainable, pd, gd, sd, group, whole, count, _, numel in held:
        if group == 1:
            shard = numel
        else:
            d0 = shape[0]
            shard = -(-d0 // group) * (numel // d0) if d0 else 0
        if cat in categories:  # (QLoRA's NF4 base and virtual counts have no weights row)
            wn = shard if p_sh and not whole else numel
            weights[cat] = wget(cat, 0) + -(-wn * size[pd] // gran) * count
        if not trainable:
            continue
        trains = True
        if master:
            m_total += -(-(shard if o_sh else numel) * 4 // gran) * count
        g_total += -(-(shard if g_sh else numel) * size[gd] // gran) * count
        if o_sh and group != 1:
            shape = (-(-shape[0] // group), *shape[1:])
        key = (shape, size[sd])
        copies[key] = get(key, 0) + count
        elements += numel * count
    kept = tuple(held)
    out: list[tuple[str, Sized]] = []
    for name in categories:
        total = weights.get(name)
        if total is not None:
            n = total * gran
            dtypes = "/".join(sorted({t.param_dtype for t in kept if t.category == name}))
            formula = partial(_formula, kept, name, p_sh, ctx, "param_dtype", True, None, n)
            out.append((name, Sized(n, formula, dtypes)))
    m = None
    if master and trains:
        n = m_total * gran
        formula = partial(_formula, kept, None, o_sh, ctx, "param_dtype", False, "fp32", n)
        m = Sized(n, formula, "fp32")
    n = g_total * gran
    dtypes = "/".join(sorted({t.grad_dtype for t in kept if t.trainable}))
    grads = Sized(n, partial(_formula, kept, None, g_sh, ctx, "grad_dtype", False, None, n), dtypes)
    return AtOnce(out, trains, m, grads, copies, elements)


def _formula(
    held: tuple[HeldTensor, ...],
    category: str | None,
    sharded: bool,
    ctx: ShardContext,
    dtype_of: str,
    whole_if_persistent: bool,
    as_dtype: str | None,
    total: int,
) -> str:
    """The formula :func:`~engine.ledger.states.allocs.state_sized` writes for the state
    of ``held``'s tensors of ``category`` (None: the trainable ones), ``total`` bytes."""
    if category is None:
        tensors = tuple(t for t in held if t.trainable)
    else:
        tensors = tuple(t for t in held if t.category == category)
    return text(lazy_formula(tensors, sharded, ctx, dtype_of, whole_if_persistent, as_dtype, total))
