"""FSDP's reduce-scatter buffers (``hbm.buckets.reduce_scatter``, ``.root_grads``)
(memory-model §3), from the rank's own trainable tensors.

Two ways to the same rows: :func:`reduce_scatter_rows` reads the held tensors at their
shard groups; :func:`regrouped_reduce_scatter_rows` works out what no group size changes
once per placement (:func:`_reduced`, cached on the tensors before their groups) and only
the padding per call — the layout search's layouts of one shape share that work
(``tests/engine/ledger/test_reduce_scatter.py`` compares the two). Formulas are written
when read.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from functools import partial
from typing import NamedTuple

from engine.ledger.held import HeldTensor
from engine.ledger.peaks.titan_units import splits_root
from engine.ledger.precision import DTYPE_BYTES, StateFormats
from engine.ledger.row import AFTER_LAST_LAYER, BACKWARD, IN_LAYERS, Row, make_row, with_middle
from engine.plan import Plan
from engine.units import fmt_count, round_up


def _fsdp2_reduce_scatter_row(
    plan: Plan, trainable: list[HeldTensor], reduce_bytes: int, shard: int
) -> Row:
    """FSDP2's reduce-scatter input, one at a time, from the second layer's backward on.

    ``FSDPParamGroup.post_backward`` (torch 2.13 torch/distributed/fsdp/_fully_shard/
    _fsdp_param_group.py) reshards the unit's parameters, then ``foreach_reduce``
    (_fsdp_collectives.py) copies its unsharded gradients into one flat input in the
    reduce dtype, every tensor padded to ``shard`` chunks of ceil(d0 / shard) rows, and
    frees them; the input is kept until the next unit's post-backward waits on it and
    drops it. So while a layer runs backward the previous layer's input is live — none
    during the last layer's (nothing was reduced yet). The layer's own unsharded
    gradients need no row: they grow while its saved (or recomputed) tensors are freed,
    and at the copy-in they stand where its gathered parameters stood, so that moment
    never exceeds the layer's first backward ops, which the rows sum."""
    per_unit: dict[str, int] = defaultdict(int)
    least, most = _unit_counts(trainable)
    for t in trainable:
        if t.unit != "root" and t.shape:
            d0 = t.shape[0]
            rest = t.numel // d0 if d0 else 0
            copies = t.count // least[t.unit]  # a folded expert's copies in the unit
            g = t.group  # its own shard group: the expert DP group for routed experts
            per_unit[t.unit] += -(-d0 // g) * g * rest * copies  # ceil_div, inlined
    numel = max(per_unit.values(), default=0)
    return _fsdp2_row(plan, numel, sum(most[u] for u in per_unit), reduce_bytes, shard)


def _unit_counts(trainable: Iterable[HeldTensor]) -> tuple[dict[str, int], dict[str, int]]:
    """Per layer unit, the fewest and the most copies of its tensors (a folded layer's
    count; a routed expert's is its layers' times the experts folded into it)."""
    least: dict[str, int] = {}
    most: dict[str, int] = {}
    for t in trainable:
        u, c = t.unit, t.count
        least[u] = min(least.get(u, c), c)
        most[u] = max(most.get(u, c), c)
    return least, most


def _fsdp2_row(plan: Plan, numel: int, n_layers: int, reduce_bytes: int, shard: int) -> Row:
    """:func:`_fsdp2_reduce_scatter_row` of the largest layer unit's padded elements."""
    n = round_up(numel * reduce_bytes, plan.runtime.allocation_granularity_bytes)
    return make_row(
        id="hbm.buckets.reduce_scatter",
        label="Reduce-scatter input of the previous layer (one at a time)",
        state="buckets",
        role="reduce_scatter_input",
        location="hbm",
        kind="peak",
        group="buckets",
        low=n,
        high=n,
        formula=partial(_fsdp2_formula, shard, numel, reduce_bytes, n),
        source="fsdp2-prefetch",
        phases=BACKWARD,
        backward=with_middle(AFTER_LAST_LAYER, n_layers),
    )


def _fsdp2_formula(shard: int, numel: int, reduce_bytes: int, n: int) -> str:
    return (
        f"one decoder-layer unit flat and padded to {shard} chunks, "
        f"{fmt_count(numel)} el. × {reduce_bytes} B (reduce dtype) = {fmt_count(n)} B; "
        "live from the second layer's backward on"
    )


def _unit_elems(plan: Plan, trainable: Iterable[HeldTensor]) -> tuple[int, int]:
    """(the largest layer unit's trainable elements, the root unit's but a separate
    embedding's, whose grad appears only at the very end of backward)."""
    units: dict[str, int] = defaultdict(int)
    tied = plan.model.architecture.tied_embeddings
    for t in trainable:
        if t.unit == "root" and not tied and t.name == "model.embed_tokens.weight":
            continue  # the embedding's grad appears only at the very end of backward
        units[t.unit] += t.numel
    one = max((n for u, n in units.items() if u != "root"), default=0)
    return one, units.get("root", 0)


def reduce_scatter_rows(
    plan: Plan, trainable: list[HeldTensor], formats: StateFormats, fsdp2: bool, shard: int
) -> list[Row]:
    """FSDP: the reduce-scatter buffers, in the reduce dtype (FSDP2: one input at a time;
    FSDP1: one unit's unsharded gradients and its input, up to one more in flight); the
    root unit's gradients wait until the end of backward."""
    one, root = _unit_elems(plan, trainable)
    first = (
        _fsdp2_reduce_scatter_row(plan, trainable, formats.reduce_bytes, shard)
        if fsdp2
        else _fsdp1_row(plan, formats, one)
    )
    return _with_root(plan, first, root, fsdp2)


def _fsdp1_row(plan: Plan, formats: StateFormats, one: int) -> Row:
    """FSDP1: one unit's unsharded gradients and its reduce-scatter input."""
    gran, gbytes = plan.runtime.allocation_granularity_bytes, formats.reduce_bytes
    c = DTYPE_BYTES[plan.method.precision.compute_dtype]
    low = round_up(one * c, gran) + (round_up(one * gbytes, gran) if gbytes != c else 0)
    high = low + round_up(one * gbytes, gran)
    return make_row(
        id="hbm.buckets.reduce_scatter",
        label="Unsharded grads of one unit and its reduce-scatter input",
        state="buckets",
        location="hbm",
        kind="peak",
        group="buckets",
        low=low,
        high=high,
        formula=partial(_fsdp1_formula, one, c, gbytes, low, round_up(one * gbytes, gran)),
        source="fsdp1",
        phases=BACKWARD,
        backward=IN_LAYERS,
    )


def _fsdp1_formula(one: int, c: int, gbytes: int, low: int, more: int) -> str:
    return (
        f"{fmt_count(one)} el. × {c} B"
        + (f" + {gbytes} B reduce-dtype copy" if gbytes != c else "")
        + f" = {fmt_count(low)} B; up to one more reduce-scatter input in flight "
        f"(+{fmt_count(more)} B)"
    )


def _with_root(plan: Plan, first: Row, root: int, fsdp2: bool) -> list[Row]:
    """``first`` and, when the root unit trains, its unsharded gradients' row (none where
    torchtitan's FSDP2 shards embedding and [norm, output] as units of their own: the
    head's grads are reduce-scattered at its own post-backward, before the layers')."""
    rows = [first]
    if root and not (fsdp2 and splits_root(plan)):
        c = DTYPE_BYTES[plan.method.precision.compute_dtype]
        rb = round_up(root * c, plan.runtime.allocation_granularity_bytes)
        rows.append(
            make_row(
                id="hbm.buckets.root_grads",
                label="Root unit's unsharded grads (reduced after backward)",
                state="buckets",
                location="hbm",
                kind="peak",
                group="buckets",
                low=rb,
                high=rb,
                formula=partial(_root_formula, root, c, rb),
                source="fsdp2-prefetch",
                phases=BACKWARD,
                backward=IN_LAYERS,
            )
        )
    return rows


def _root_formula(root: int, c: int, rb: int) -> str:
    return f"{fmt_count(root)} el. × {c} B = {fmt_count(rb)} B"


class _Reduced(NamedTuple):
    """What FSDP's reduce-scatter rows read of a stage's held tensors whatever their shard
    groups (:func:`_reduced`): :func:`_unit_elems`, each layer unit's tensors as (dim 0,
    elements of one dim-0 row times its copies in the unit, routed expert's), the layers
    they stand for, and the index of a dense and of an expert tensor (−1: none), whose
    groups are those of every dense / expert tensor (:func:`~engine.ledger.held.regrouped`)."""

    one: int
    root: int
    flat: tuple[tuple[tuple[int, int, bool], ...], ...]
    n_layers: int
    dense: int
    expert: int


_REDUCED: dict[int, tuple[tuple[HeldTensor, ...], bool, _Reduced]] = {}
""":func:`_reduced` by the unsharded tuple's identity (cached, so a layout search's DP
values of one shape pass the same one; the entry holds it, so its id is not reused)."""


def _reduced(plan: Plan, unsharded: tuple[HeldTensor, ...]) -> _Reduced:
    tied = plan.model.architecture.tied_embeddings
    got = _REDUCED.get(id(unsharded))
    if got is not None and got[0] is unsharded and got[1] == tied:
        return got[2]
    trainable = [t for t in unsharded if t.trainable]
    least, most = _unit_counts(trainable)
    per_unit: dict[str, list[tuple[int, int, bool]]] = defaultdict(list)
    for t in trainable:
        if t.unit != "root" and t.shape:
            d0 = t.shape[0]
            rest = t.numel // d0 if d0 else 0
            per_unit[t.unit].append((d0, rest * (t.count // least[t.unit]), t.expert))
    flags = [t.expert for t in unsharded]
    dense = flags.index(False) if False in flags else -1
    expert = flags.index(True) if True in flags else -1
    flat = tuple(tuple(p) for p in per_unit.values())
    n_layers = sum(most[u] for u in per_unit)
    out = _Reduced(*_unit_elems(plan, trainable), flat, n_layers, dense, expert)
    if len(_REDUCED) >= 1024:
        _REDUCED.clear()
    _REDUCED[id(unsharded)] = (unsharded, tied, out)
    return out


def regrouped_reduce_scatter_rows(
    plan: Plan,
    held: list[HeldTensor],
    unsharded: tuple[HeldTensor, ...],
    formats: StateFormats,
    fsdp2: bool,
    shard: int,
) -> list[Row]:
    """:func:`reduce_scatter_rows` of ``held``, regrouped from ``unsharded``: only the
    padding to the shard groups is worked out per call (a test compares the two)."""
    r = _reduced(plan, unsharded)
    if not fsdp2:
        return _with_root(plan, _fsdp1_row(plan, formats, r.one), r.root, False)
    de = held[r.dense].group if r.dense >= 0 else 1
    ex = held[r.expert].group if r.expert >= 0 else 1
    numel = 0
    for parts in r.flat:
        s = 0
        for d0, rest, is_expert in parts:
            g = ex if is_expert else de
            s += -(-d0 // g) * g * rest  # ceil_div, inlined
        numel = max(numel, s)
    first = _fsdp2_row(plan, numel, r.n_layers, formats.reduce_bytes, shard)
    return _with_root(plan, first, r.root, True)
