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
The search's states go further (:func:`sized_folded`): a placement's tensors, the same
at every shard group size but their groups, are folded once (:func:`folded`: tensors
alike in every field a size reads counted as one entry, about half as many), and each
layout's pass runs over the entries.

The numbers and the formulas (written when read, from the same arguments
:func:`~engine.ledger.states.allocs.state_sized` gives them) are those of the state
by state sizing; ``tests/engine/ledger/test_one_pass_states.py`` compares the rows of
each with them, formula text included, on random plans and the presets.
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

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
    dtypes = {
        name: "/".join(sorted({t.param_dtype for t in kept if t.category == name}))
        for name in categories
        if name in weights
    }
    grad_dtypes = "/".join(sorted({t.grad_dtype for t in kept if t.trainable}))
    sums = (weights, trains, m_total, g_total, copies, elements)
    return _at_once(sums, kept, master, ctx, categories, dtypes, grad_dtypes)


_Sums = tuple[dict[str, int], bool, int, int, dict[tuple[tuple[int, ...], int], int], int]
"""One pass's sums: weights by category (bytes ÷ granularity), whether any tensor is
trainable, the master copy's and the gradients' bytes ÷ granularity, the optimizer's
allocations and the trainable elements."""


def _at_once(
    sums: _Sums,
    kept: tuple[HeldTensor, ...],
    master: bool,
    ctx: ShardContext,
    categories: tuple[str, ...],
    dtypes: dict[str, str],
    grad_dtypes: str,
) -> AtOnce:
    """The :class:`AtOnce` of one pass's ``sums`` over ``kept`` (the held tensors, which
    the formulas read when written), ``dtypes``: each weights category's label dtypes,
    ``grad_dtypes``: the trainable tensors' gradient dtypes."""
    weights, trains, m_total, g_total, copies, elements = sums
    p_sh, g_sh, o_sh = ctx.rule.params, ctx.rule.grads, ctx.rule.optimizer
    gran = ctx.granularity if ctx.granularity > 1 else 1
    out: list[tuple[str, Sized]] = []
    for name in categories:
        total = weights.get(name)
        if total is not None:
            n = total * gran
            formula = partial(_formula, kept, name, p_sh, ctx, "param_dtype", True, None, n)
            out.append((name, Sized(n, formula, dtypes[name])))
    m = None
    if master and trains:
        n = m_total * gran
        formula = partial(_formula, kept, None, o_sh, ctx, "param_dtype", False, "fp32", n)
        m = Sized(n, formula, "fp32")
    n = g_total * gran
    formula = partial(_formula, kept, None, g_sh, ctx, "grad_dtype", False, None, n)
    return AtOnce(out, trains, m, Sized(n, formula, grad_dtypes), copies, elements)


Shape = tuple[int, ...]

Entry = tuple[Shape, int, int, Shape, int, str | None, int, int, int, bool, bool, bool, int]
"""A :class:`Folded` entry: the shape, its first dimension, the elements per row of it
(0 for an empty first dimension), the shape after the first dimension, the elements,
the weights category (None: no weights row), the parameter's element size (0 without a
weights row), the gradient's and optimizer state's (0 when frozen), whether it stays
whole (ZeRO-3 persistence), whether it is a routed expert's, whether it is trainable,
and how many tensors it stands for."""


class Folded(NamedTuple):
    """A placement's held tensors at shard groups of one, folded for :func:`sized_folded`:
    tensors alike in every field a state's size reads (shape, category, trainability,
    dtypes, persistence, expert or dense) are one :data:`Entry` counting them all, in the
    order of their first appearance; and what no group size changes: each weights
    category's label dtypes, whether any tensor is trainable, the gradients' dtypes."""

    entries: tuple[Entry, ...]
    dtypes: dict[str, str]
    trains: bool
    grad_dtypes: str


def folded(unsharded: tuple[HeldTensor, ...], categories: tuple[str, ...]) -> Folded | None:
    """:class:`Folded` of a placement's held tensors at shard groups of one; None when a
    tensor has no dimension (:func:`sized_at_once` sizes those, as it always did). The
    label dtypes are read from each entry's first tensor: the tensors an entry folds
    share their category, trainability and dtypes."""
    index: dict[tuple[object, ...], list[Any]] = {}
    size = DTYPE_BYTES
    for t in unsharded:
        # shape; category … state dtype; ZeRO-3 persistence; expert (HeldTensor's order)
        key = (t[1], t[3:8], t[9], t[11])
        got = index.get(key)
        if got is not None:
            got[-2] += t[10]  # (the count; the first tensor is last)
            continue
        _, shape, _, cat, trainable, pd, gd, sd, _, whole, count, expert, numel = t
        if not shape:
            return None
        d0 = shape[0]
        weighed = cat in categories
        index[key] = [
            shape,
            d0,
            numel // d0 if d0 else 0,
            shape[1:],
            numel,
            cat if weighed else None,
            # sizes read where they count only (QLoRA's base is NF4, which has none)
            size[pd] if weighed else 0,
            size[gd] if trainable else 0,
            size[sd] if trainable else 0,
            whole,
            expert,
            trainable,
            count,
            t,  # the first tensor (its dtypes for the labels), dropped below
        ]
    firsts = [e[-1] for e in index.values()]
    dtypes = {}
    for name in categories:
        of = {t.param_dtype for t in firsts if t.category == name}
        if of:
            dtypes[name] = "/".join(sorted(of))
    grads = {t.grad_dtype for t in firsts if t.trainable}
    entries = tuple([tuple(e[:-1]) for e in index.values()])
    return Folded(entries, dtypes, bool(grads), "/".join(sorted(grads)))


def sized_folded(
    f: Folded,
    dense: int,
    expert: int,
    held: tuple[HeldTensor, ...],
    master: bool,
    ctx: ShardContext,
    categories: tuple[str, ...],
) -> AtOnce:
    """:func:`sized_at_once` of ``held``, the tensors ``f`` folds regrouped over a
    ``dense`` data-parallel group (an ``expert`` one for the routed experts'):
    :func:`~engine.ledger.held.regrouped`, which is all that sets their groups. Every
    sum is linear in each tensor's count, so a folded entry adds what its tensors did one
    by one; the optimizer's allocations come in the same first-appearance order (an
    entry's first tensor is the first of its shapes). ``held`` is read by the formulas
    only, when written. ``tests/engine/ledger/test_one_pass_states.py`` compares the
    rows with the state-by-state ones."""
    rule = ctx.rule
    p_sh, g_sh, o_sh = rule.params, rule.grads, rule.optimizer
    gran = ctx.granularity if ctx.granularity > 1 else 1  # round_up's rule
    weights: dict[str, int] = {}  # category → allocation bytes ÷ gran
    wget = weights.get
    m_total = g_total = elements = 0
    copies: dict[tuple[tuple[int, ...], int], int] = {}
    get = copies.get
    for shape, d0, rest, tail, numel, cat, pb, gb, sb, whole, is_exp, trainable, count in f.entries:
        group = expert if is_exp else dense
        shard = numel if group == 1 else -(-d0 // group) * rest
        if cat is not None:
            wn = shard if p_sh and not whole else numel
            weights[cat] = wget(cat, 0) + -(-wn * pb // gran) * count
        if not trainable:
            continue
        if master:
            m_total += -(-(shard if o_sh else numel) * 4 // gran) * count
        g_total += -(-(shard if g_sh else numel) * gb // gran) * count
        key = ((-(-d0 // group), *tail) if o_sh and group != 1 else shape, sb)
        copies[key] = get(key, 0) + count
        elements += numel * count
    sums = (weights, f.trains, m_total, g_total, copies, elements)
    return _at_once(sums, held, master, ctx, categories, f.dtypes, f.grad_dtypes)


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
