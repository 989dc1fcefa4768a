"""Gathered parameter units (``hbm.gathered.*``): the unsharded parameters and prefetch
of ZeRO-3 and FSDP (memory-model §3). Sizes come from the rank's own tensors (TP / PP
placement, the strategy's chunking); DeepSpeed's live-parameter caps are a bound, so
ZeRO-3 gives a low–high range. Which backward moments each unit is live at is decided
here (:mod:`engine.ledger.phases`)."""

from __future__ import annotations

from collections import defaultdict
from functools import partial
from typing import NamedTuple

from engine.ledger.groups import ranks_per_node
from engine.ledger.peaks.fsdp1_prefetch import fsdp1_in_flight
from engine.ledger.peaks.gathered_nf4 import gathered_view, reused_layer_bytes, reused_per_element
from engine.ledger.peaks.kept_gathered import gathered_row, kept_gathered_rows
from engine.ledger.peaks.reuse import reused_at_loss
from engine.ledger.peaks.titan_prefetch import own_buffer
from engine.ledger.peaks.titan_units import (
    HEAD_MOMENTS,
    no_backward_prefetch,
    shards_one_rank,
    splits_root,
    titan_root_rows,
    whole_root,
    whole_root_rows,
)
from engine.ledger.placement import LocalTensor, expert_dp_group, stage_layer_ranges
from engine.ledger.precision import DTYPE_BYTES, StateFormats
from engine.ledger.row import (
    AT_LOSS,
    BACKWARD,
    BEFORE_FIRST_LAYER,
    FORWARD_BACKWARD,
    IN_LAYERS,
    NO_MOMENTS,
    UNTIL_LAYERS_FREE,
    Moment,
    Row,
    make_row,
    with_middle,
)
from engine.ledger.sharding import shard_group_size
from engine.plan import Plan
from engine.stacks.families import StrategyRule, keeps_all_gathered
from engine.units import ceil_div, fmt_count, round_up


def gather_bytes(plan: Plan, formats: StateFormats) -> int:
    """Element size of gathered parameters: FSDP MixedPrecision / DeepSpeed cast the
    gathered copy to the compute dtype; otherwise parameters gather as stored."""
    if plan.method.precision.policy in ("autocast", "amp_master", "pure_16bit"):
        return DTYPE_BYTES[plan.method.precision.compute_dtype]
    return formats.param_bytes


def _units(
    placed: tuple[LocalTensor, ...],
) -> tuple[list[LocalTensor], dict[int, list[LocalTensor]]]:
    root: list[LocalTensor] = []
    layers: dict[int, list[LocalTensor]] = defaultdict(list)
    for t in placed:
        if t.tensor.layer is None:
            root.append(t)
        else:
            layers[t.tensor.layer].append(t)
    return root, layers


def copies_in_unit(counts: list[int]) -> list[int]:
    """How many tensors of one unit each folded tensor stands for: a unit's tensors carry
    ``count`` = its folded layers (the least count in the unit), and a routed expert's
    representative that times the experts it stands for (placement ``experts_folded``),
    so one unit holds ``count // least`` of it."""
    least = min(counts, default=1)
    return [c // least for c in counts]


def _per_tensor(ts: list[LocalTensor], bpe: int, gran: int) -> int:
    copies = copies_in_unit([t.count for t in ts])
    return sum([round_up(t.numel * bpe, gran) * c for t, c in zip(ts, copies, strict=True)])


Flat = tuple[tuple[int, int, bool], ...]
"""A unit's tensors as (dim 0, the elements of one dim-0 row times the copies in the
unit, routed expert's), those with a dim 0 of at least one: what its padded all-gather
output reads of them (:func:`_padded_flat`)."""


def _flat_parts(ts: list[LocalTensor]) -> Flat:
    """:data:`Flat` of a unit's tensors: made once per placement (:func:`_group_free`),
    read at every shard group size."""
    out = []
    for t, c in zip(ts, copies_in_unit([t.count for t in ts]), strict=True):
        if t.shape and t.shape[0]:
            out.append((t.shape[0], t.numel // t.shape[0] * c, t.expert))
    return tuple(out)


def _padded_flat(parts: Flat, n: int, n_expert: int, bpe: int, gran: int) -> int:
    """One all-gather output: every tensor padded to N chunks of ceil(d0/N) rows, N the
    group that shards it (``n_expert`` for routed experts: a stacked ``(E, …)`` tensor
    pads its expert dim)."""
    numel = 0
    for d0, rest, expert in parts:
        g = n_expert if expert else n
        numel += -(-d0 // g) * g * rest  # ceil_div, inlined
    return round_up(numel * bpe, gran)


class _Units(NamedTuple):
    """What a stage's gathered units are whatever the shard group: the root's and the
    layers' tensors, the root's and the largest layer unit's gathered bytes, and the
    decoder layers they stand for (folded layers counted out), and the unit FSDP2
    prefetches while the last layer runs backward."""

    root: list[LocalTensor]
    layers: dict[int, list[LocalTensor]]
    root_bytes: int
    unit: int
    n_layers: int
    flat: dict[int, Flat]  # each layer unit's :func:`_flat_parts`
    before_last: int | None


_UNITS: dict[int, tuple[tuple[LocalTensor, ...], int, int, _Units]] = {}
""":func:`_group_free` by the placed tuple's identity (it is cached, so a layout search's
DP values of one shape pass the same one; the entry holds it, so its id is not reused)."""


def _group_free(placed: tuple[LocalTensor, ...], gb: int, gran: int) -> _Units:
    got = _UNITS.get(id(placed))
    if got is not None and got[0] is placed and got[1] == gb and got[2] == gran:
        return got[3]
    root, layers = _units(placed)
    unit = max((_per_tensor(ts, gb, gran) for ts in layers.values()), default=0)
    n_layers = sum(ts[0].count for ts in layers.values())
    flat = {i: _flat_parts(ts) for i, ts in layers.items()}
    # the unit FSDP2 prefetches while the last layer runs backward: the one before it,
    # in layer order (a folded unit stands for its ``count`` layers)
    order = [i for i in sorted(layers) for _ in range(min([t.count for t in layers[i]]))]
    before = order[-2] if len(order) >= 2 else None
    out = _Units(root, layers, _per_tensor(root, gb, gran), unit, n_layers, flat, before)
    if len(_UNITS) >= 1024:
        _UNITS.clear()
    _UNITS[id(placed)] = (placed, gb, gran, out)
    return out


def _buffer_row(
    nbuf: int, buf: int, gb: int, src: str, moments: frozenset[Moment], last: bool = False
) -> Row:
    """FSDP2's all-gather output buffer (``last``: the one the last layer's backward
    prefetches; none at ``backward.start``: none in forward, torchtitan's head unit)."""
    what = "the unit before the last layer" if last else "one decoder-layer unit"
    in_bwd = last or (moments and "backward.start" not in moments)
    return make_row(
        id="hbm.gathered.all_gather_buffer" + (".last_layer" if last else ""),
        label=f"All-gather output buffer of {nbuf} unit(s) (prefetch)",
        state="gathered",
        location="hbm",
        kind="peak",
        group="gathered",
        low=nbuf * buf,
        high=nbuf * buf,
        formula=partial(_buffer_formula, nbuf, what, gb, nbuf * buf),
        source=src,
        phases=BACKWARD if in_bwd else FORWARD_BACKWARD,
        backward=moments,
        role="all_gather_output",
    )


def _buffer_formula(nbuf: int, what: str, gb: int, n: int) -> str:
    return (
        f"{nbuf} × {what} gathered flat, {gb} B/element = "
        f"{fmt_count(n)} B (kept until the next all-gather)"
    )


def gathered_rows(
    plan: Plan,
    placed: tuple[LocalTensor, ...],
    formats: StateFormats,
    shard: int,
    rule: StrategyRule,
    stage: int = 0,
    n_expert: int | None = None,  # the routed experts' shard group (None: the plan's)
) -> list[Row]:
    """Unsharded parameter units and prefetch of ZeRO-3 / FSDP strategies."""
    if not rule.params or (shard <= 1 and not (rule.family == "fsdp2" and shards_one_rank(plan))):
        return []
    placed = gathered_view(plan, placed, gather_bytes(plan, formats))  # QLoRA's packed data
    if rule.fsdp:
        return _fsdp_rows(plan, placed, formats, shard, rule, n_expert)
    return _zero3_rows(plan, placed, formats) + _reused_rows(plan, formats, stage)


def _reused_rows(plan: Plan, formats: StateFormats, stage: int) -> list[Row]:
    """ZeRO-3 parameters the reuse distance keeps gathered across the loss
    (:mod:`engine.ledger.peaks.reuse`)."""
    par, k = plan.parallelism, plan.parallelism.knobs
    arch = plan.model.architecture
    layers = stage_layer_ranges(arch, par)[stage]
    kept = reused_at_loss(
        arch,
        layers,
        stage == 0,
        stage == par.pp - 1,
        k.ds_max_reuse_distance,
        k.ds_param_persistence_threshold,
    )
    gb, gran = gather_bytes(plan, formats), plan.runtime.allocation_granularity_bytes
    limit = fmt_count(k.ds_max_reuse_distance)
    rows = []
    parts = (
        ("hbm.gathered.reused.root", kept.root, "Output head kept gathered through the loss"),
        ("hbm.gathered.reused.layers", kept.layers, "Last layers kept gathered into backward"),
    )
    for (row_id, (low_el, high_el), label), backward, in_layers in zip(
        parts, (AT_LOSS, UNTIL_LAYERS_FREE), (False, True), strict=True
    ):
        if not high_el:
            continue
        low, high = (  # a layer's QLoRA weights gather as packed 4-bit data
            round_up(reused_layer_bytes(plan, el, gb) if in_layers else el * gb, gran)
            for el in (low_el, high_el)
        )
        why = (
            ""
            if low_el == high_el
            else "; the high end adds modules whose reuse lands within one sibling module of "
            "the limit (autograd orders siblings such as gate/up)"
        )
        rows.append(
            make_row(
                id=row_id,
                label=f"{label} (reuse distance)",
                state="gathered",
                location="hbm",
                kind="peak",
                group="gathered",
                low=low,
                high=high,
                formula=f"parameters used again within stage3_max_reuse_distance {limit} "
                f"elements are not released: {fmt_count(low_el)}–{fmt_count(high_el)} el. × "
                f"{reused_per_element(plan, gb, in_layers)}{why}",
                source="deepspeed-reuse-distance",
                phases=FORWARD_BACKWARD,
                backward=backward,
            )
        )
    return rows


def _fsdp_rows(
    plan: Plan,
    placed: tuple[LocalTensor, ...],
    formats: StateFormats,
    shard: int,
    rule: StrategyRule,
    n_expert: int | None,
) -> list[Row]:
    """FSDP1 / FSDP2: the root unit, the all-gather buffer (FSDP2) and the layer units."""
    par, k = plan.parallelism, plan.parallelism.knobs
    gran = plan.runtime.allocation_granularity_bytes
    gb = gather_bytes(plan, formats)
    root, _, root_b, unit, n_layers, parts, before = _group_free(placed, gb, gran)
    fsdp2 = rule.family == "fsdp2"
    src = "fsdp2-prefetch" if fsdp2 else "fsdp1"
    keep_all = keeps_all_gathered(plan.parallelism)
    rows: list[Row] = []
    if root_b and fsdp2 and splits_root(plan):
        rows += titan_root_rows(plan, root, partial(_per_tensor, bpe=gb, gran=gran), shard, unit)
    elif root_b and fsdp2 and whole_root(plan):
        rows += whole_root_rows(plan, root_b, len(root), unit)
    elif root_b:
        rows.append(
            make_row(
                id="hbm.gathered.root",
                label="Root unit unsharded (embedding, final norm, lm_head)",
                state="gathered",
                location="hbm",
                kind="peak",
                group="gathered",
                low=root_b,
                high=root_b,
                formula=partial(_root_formula, len(root), gb, root_b),
                source=src,
                phases=FORWARD_BACKWARD,
                role="root_unit",
            )
        )
    if fsdp2:
        if n_expert is None:
            n_expert = shard_group_size(par, expert_dp_group(par), ranks_per_node(plan))
        flat = {i: _padded_flat(p, shard, n_expert, gb, gran) for i, p in parts.items()}
        buf = max(flat.values(), default=0)
        nbuf = max(1, k.fsdp_prefetch_units)
        # every unit stayed gathered: backward issues no all-gather; otherwise the
        # prefetched unit waits in it until the first layer's backward
        moments = NO_MOMENTS if keep_all else with_middle(BEFORE_FIRST_LAYER, n_layers)
        own = no_backward_prefetch(plan)  # torchtitan's chunked loss: each its own unit
        moments -= BEFORE_FIRST_LAYER if own else HEAD_MOMENTS if splits_root(plan) else NO_MOMENTS
        second_last = flat[before] if before is not None else None
        split = nbuf == 1 and second_last is not None and second_last != buf
        row = _buffer_row(nbuf, buf, gb, src, moments - {"backward.layers"} if split else moments)
        rows.append(own_buffer(row) if own else row)
        if split and "backward.layers" in moments and second_last is not None:
            rows.append(_buffer_row(1, second_last, gb, src, frozenset({"backward.layers"}), True))
    if keep_all:  # each unit still reshards after its own backward (kept_gathered)
        frees = fsdp2 or plan.batch.grad_accum == 1
        ids = ("hbm.gathered.layers", "hbm.gathered.layers_left", "hbm.gathered.first_layer")
        return rows + kept_gathered_rows(n_layers, unit, src, frees, ids)
    if fsdp2:
        live, why = 1, "current unit (the prefetched one is the all-gather buffer)"
    else:
        live, why, ahead = fsdp1_in_flight(plan, unit, n_layers)
        rows += ahead  # the last layer's unit the root prefetches before the loss
    n = live * unit
    rows.append(
        make_row(
            id="hbm.gathered.layers",
            label="Layer units unsharded during backward",
            state="gathered",
            location="hbm",
            kind="peak",
            group="gathered",
            low=n,
            high=n,
            formula=partial(_layers_formula, why, live, unit, n),
            source=src,
            phases=BACKWARD,
            backward=IN_LAYERS,
            role="layer_units",
        )
    )
    rs = k.fsdp_reshard_after_forward
    if fsdp2 and isinstance(rs, int) and not isinstance(rs, bool) and rs > 1:
        kept = n_layers * ceil_div(unit, rs)
        rows.append(
            gathered_row(
                "hbm.gathered.resharded",
                f"Layer units kept 1/{rs} gathered after forward",
                kept,
                f"{n_layers} × {fmt_count(unit)} B ÷ {rs} = {fmt_count(kept)} B",
                src,
                FORWARD_BACKWARD,
            )
        )
    return rows


def _root_formula(n_root: int, gb: int, root_b: int) -> str:
    return (
        f"{n_root} tensors × {gb} B, kept from forward through backward "
        f"(the root is not resharded after forward) = {fmt_count(root_b)} B"
    )


def _layers_formula(why: str, live: int, unit: int, n: int) -> str:
    return f"{why}: {live} × {fmt_count(unit)} B = {fmt_count(n)} B"


def _zero3_rows(plan: Plan, placed: tuple[LocalTensor, ...], formats: StateFormats) -> list[Row]:
    """ZeRO-3: one layer gathered, up to the live-parameter cap with prefetch.

    Not live at the forward moment (the loss): DeepSpeed 0.19.8
    runtime/zero/parameter_offload.py ``post_sub_module_forward_function`` calls
    ``PartitionedParameterCoordinator.release_sub_module`` (partitioned_param_coordinator.py)
    on each decoder layer once its forward ends, so at the loss only the head stays
    gathered (``hbm.gathered.reused.*`` counts what the reuse distance keeps) — the
    trace grid's h512 ZeRO-3 case held one layer fewer than this row counted there."""
    k = plan.parallelism.knobs
    gran = plan.runtime.allocation_granularity_bytes
    gb = gather_bytes(plan, formats)
    _root, layers = _units(placed)
    elems = [sum(t.numel for t in ts) for ts in layers.values()]
    one = max(elems, default=0)
    hi_el = min(k.ds_max_live_parameters, one + k.ds_prefetch_bucket_elements)
    hi_el = max(hi_el, one)
    low, high = round_up(one * gb, gran), round_up(hi_el * gb, gran)
    return [
        make_row(
            id="hbm.gathered.layers",
            label="ZeRO-3 gathered parameters and prefetch",
            state="gathered",
            location="hbm",
            kind="peak",
            group="gathered",
            low=low,
            high=high,
            formula=f"one layer {fmt_count(one)} el. up to min(max_live "
            f"{fmt_count(k.ds_max_live_parameters)}, "
            f"layer + prefetch bucket {fmt_count(k.ds_prefetch_bucket_elements)}) el. × {gb} B",
            source="deepspeed-zero3-config",
            phases=BACKWARD,
            backward=IN_LAYERS,
        )
    ]
