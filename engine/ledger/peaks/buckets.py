"""Gradient communication buffers (``hbm.buckets.*``) and unsharded gradients held across
micro-batches (``hbm.grads_unsharded.accumulation``) (memory-model §1, §3).

Sizes come from the rank's own trainable tensors, except DeepSpeed's IPG buckets, which
are allocated at their configured size whatever the model.
"""

from __future__ import annotations

from collections import defaultdict

from engine.ledger.held import HeldTensor
from engine.ledger.precision import DTYPE_BYTES, StateFormats
from engine.ledger.row import (
    AFTER_LAST_LAYER,
    ALL_PHASES,
    BACKWARD,
    FORWARD_BACKWARD,
    IN_LAYERS,
    Row,
    make_row,
    with_middle,
)
from engine.plan import Plan
from engine.stacks.families import StrategyRule
from engine.units import ceil_div, fmt_count, round_up

MIB = 2**20


def bucket_rows(
    plan: Plan, held: list[HeldTensor], formats: StateFormats, rule: StrategyRule, shard: int
) -> list[Row]:
    """Gradient communication buffers: DDP buckets, ZeRO buckets, FSDP reduce-scatter."""
    trainable = [t for t in held if t.trainable]
    if not trainable:
        return []
    replicas = max((t.group for t in trainable), default=1)
    if rule.shards_nothing and rule.family != "fsdp1" and replicas > 1:
        # FSDP1 NO_SHARD has no DDP reducer: its post-backward hook all-reduces each
        # unit's flat_param.grad in place (torch/distributed/fsdp/_runtime_utils.py)
        return [_ddp_row(plan, trainable, formats)]
    if rule.family == "deepspeed":
        return [
            _zero3_row(plan, trainable, formats)
            if rule.params
            else _zero_row(plan, trainable, formats)
        ]
    if rule.fsdp and rule.grads and shard > 1:
        return _reduce_scatter_rows(plan, trainable, formats, rule.family == "fsdp2", shard)
    return []


def _ddp_row(plan: Plan, trainable: list[HeldTensor], formats: StateFormats) -> Row:
    k, gran, gbytes = (
        plan.parallelism.knobs,
        plan.runtime.allocation_granularity_bytes,
        formats.grad_bytes,
    )
    numel = sum(t.numel * t.count for t in trainable)
    total = numel * gbytes
    cap = max(1, int(k.ddp_bucket_cap_mb * MIB))
    n_buckets = ceil_div(total, cap)
    n = round_up(total, gran) + (n_buckets - 1) * gran
    return make_row(
        id="hbm.buckets.ddp",
        label="DDP gradient buckets (gradient_as_bucket_view=False)",
        state="buckets",
        location="hbm",
        kind="peak",
        group="buckets",
        low=round_up(total, gran),
        high=n,
        formula=f"a flat copy of every gradient: {fmt_count(numel)} × {gbytes} B in {n_buckets} "
        f"buckets of {k.ddp_bucket_cap_mb} MiB = {fmt_count(total)} B",
        source="pytorch-ddp",
        phases=ALL_PHASES,
    )


def _zero_row(plan: Plan, trainable: list[HeldTensor], formats: StateFormats) -> Row:
    """ZeRO-1/2: the IPG reduce buckets of ``setup_buckets``.

    DeepSpeed 0.19.6 stage_1_and_2.py ``setup_buckets`` allocates one
    ``reduce_bucket_size`` buffer in the model dtype when backward starts (with
    ``contiguous_gradients``, the default), and a second only with ``overlap_comm``;
    ``_release_ipg_buffers`` frees them at the end of backward. The post-step all-gather
    writes into the flat 16-bit buffer itself (runtime/utils.py
    ``all_gather_into_tensor_dp_groups``), so ``allgather_bucket_size`` allocates nothing.
    """
    k, gran, gbytes = (
        plan.parallelism.knobs,
        plan.runtime.allocation_granularity_bytes,
        formats.grad_bytes,
    )
    overlap = bool(k.ds_overlap_comm)
    n_buf = 2 if overlap else 1
    one = round_up(k.ds_reduce_bucket_elements * gbytes, gran)
    n = n_buf * one
    return make_row(
        id="hbm.buckets.zero",
        label="ZeRO IPG reduce bucket" + ("s (overlap_comm)" if overlap else ""),
        state="buckets",
        location="hbm",
        kind="peak",
        group="buckets",
        low=n,
        high=n,
        formula=f"{n_buf} × reduce_bucket_size {fmt_count(k.ds_reduce_bucket_elements)} el. × "
        f"{gbytes} B"
        + (" (a second buffer with overlap_comm)" if overlap else "")
        + f" = {fmt_count(n)} B, freed at the end of backward; the all-gather allocates "
        "nothing",
        source="deepspeed-zero12-buckets",
        phases=BACKWARD,
    )


def _zero3_row(plan: Plan, trainable: list[HeldTensor], formats: StateFormats) -> Row:
    """ZeRO-3: the IPG reduce bucket, allocated once and kept.

    DeepSpeed 0.19.6 stage3.py ``_setup_for_real_optimizer`` allocates one
    ``reduce_bucket_size`` buffer per communication dtype (with ``contiguous_gradients``)
    when the optimizer is built and never frees it; ``overlap_comm`` gives the reduction
    its own stream, not a second buffer.
    """
    k, gran, gbytes = (
        plan.parallelism.knobs,
        plan.runtime.allocation_granularity_bytes,
        formats.grad_bytes,
    )
    n = round_up(k.ds_reduce_bucket_elements * gbytes, gran)
    return make_row(
        id="hbm.buckets.zero",
        label="ZeRO-3 IPG reduce bucket (allocated at init)",
        state="buckets",
        location="hbm",
        kind="persistent",
        group="buckets",
        low=n,
        high=n,
        formula=f"reduce_bucket_size {fmt_count(k.ds_reduce_bucket_elements)} el. × {gbytes} B "
        f"= {fmt_count(n)} B, allocated when the optimizer is built and never freed",
        source="deepspeed-zero3-buffers",
        phases=ALL_PHASES,
    )


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
    gran = plan.runtime.allocation_granularity_bytes
    per_unit: dict[str, int] = defaultdict(int)
    least: dict[str, int] = {}
    most: dict[str, int] = {}
    for t in trainable:
        u, c = t.unit, t.count
        least[u] = min(least.get(u, c), c)
        most[u] = max(most.get(u, c), c)
    for t in trainable:
        if t.unit != "root" and t.shape:
            d0 = t.shape[0]
            rest = t.numel // d0 if d0 else 0
            copies = t.count // least[t.unit]  # a folded expert's copies in the unit
            g = t.group  # its own shard group: the expert DP group for routed experts
            per_unit[t.unit] += -(-d0 // g) * g * rest * copies  # ceil_div, inlined
    numel = max(per_unit.values(), default=0)
    n = round_up(numel * reduce_bytes, gran)
    n_layers = sum(most[u] for u in per_unit)
    return make_row(
        id="hbm.buckets.reduce_scatter",
        label="Reduce-scatter input of the previous layer (one at a time)",
        state="buckets",
        location="hbm",
        kind="peak",
        group="buckets",
        low=n,
        high=n,
        formula=f"one decoder-layer unit flat and padded to {shard} chunks, "
        f"{fmt_count(numel)} el. × {reduce_bytes} B (reduce dtype) = {fmt_count(n)} B; "
        "live from the second layer's backward on",
        source="fsdp2-prefetch",
        phases=BACKWARD,
        backward=with_middle(AFTER_LAST_LAYER, n_layers),
    )


def _reduce_scatter_rows(
    plan: Plan, trainable: list[HeldTensor], formats: StateFormats, fsdp2: bool, shard: int
) -> list[Row]:
    """FSDP: the reduce-scatter buffers, in the reduce dtype (FSDP2: one input at a time;
    FSDP1: one unit's unsharded gradients and its input, up to one more in flight); the
    root unit's gradients wait until the end of backward."""
    gran, gbytes = plan.runtime.allocation_granularity_bytes, formats.reduce_bytes
    units: dict[str, int] = defaultdict(int)
    tied = plan.model.architecture.tied_embeddings
    for t in trainable:
        if t.unit == "root" and not tied and t.name == "model.embed_tokens.weight":
            continue  # the embedding's grad appears only at the very end of backward
        units[t.unit] += t.numel
    layer_units = {u: n for u, n in units.items() if u != "root"}
    one = max(layer_units.values(), default=0)
    c = DTYPE_BYTES[plan.method.precision.compute_dtype]
    low = round_up(one * c, gran) + (round_up(one * gbytes, gran) if gbytes != c else 0)
    high = low + round_up(one * gbytes, gran)
    rows = (
        [_fsdp2_reduce_scatter_row(plan, trainable, gbytes, shard)]
        if fsdp2
        else [
            make_row(
                id="hbm.buckets.reduce_scatter",
                label="Unsharded grads of one unit and its reduce-scatter input",
                state="buckets",
                location="hbm",
                kind="peak",
                group="buckets",
                low=low,
                high=high,
                formula=f"{fmt_count(one)} el. × {c} B"
                + (f" + {gbytes} B reduce-dtype copy" if gbytes != c else "")
                + f" = {fmt_count(low)} B; up to one more reduce-scatter input in flight "
                f"(+{fmt_count(round_up(one * gbytes, gran))} B)",
                source="fsdp1",
                phases=BACKWARD,
                backward=IN_LAYERS,
            )
        ]
    )
    root = units.get("root", 0)
    if root:
        rb = round_up(root * c, gran)
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
                formula=f"{fmt_count(root)} el. × {c} B = {fmt_count(rb)} B",
                source="fsdp2-prefetch",
                phases=BACKWARD,
                backward=IN_LAYERS,
            )
        )
    return rows


def accumulation_rows(plan: Plan, held: list[HeldTensor], rule: StrategyRule) -> list[Row]:
    """Unsharded gradients held across micro-batches when accumulating without sync."""
    k = plan.parallelism.knobs
    if plan.batch.grad_accum <= 1 or not k.accumulate_without_sync or not rule.grads:
        return []
    gran = plan.runtime.allocation_granularity_bytes
    c = DTYPE_BYTES[plan.method.precision.compute_dtype]
    trainable = [t for t in held if t.trainable]
    n = sum(round_up(t.numel * c, gran) * t.count for t in trainable)
    return [
        make_row(
            id="hbm.grads_unsharded.accumulation",
            label="Unsharded grads accumulated without sync",
            state="grad_accumulation",
            location="hbm",
            kind="peak",
            group="gradients",
            low=n,
            high=n,
            formula=f"{sum(t.count for t in trainable)} trainable tensors unsharded × {c} B "
            f"over {plan.batch.grad_accum} "
            f"micro-batches (no_sync / set_requires_gradient_sync(False)) = {fmt_count(n)} B",
            source="fsdp2-prefetch",
            phases=FORWARD_BACKWARD,
        )
    ]
