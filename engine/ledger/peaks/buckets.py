"""Gradient communication buffers (``hbm.buckets.*``) and unsharded gradients held across
micro-batches (``hbm.grads_unsharded.accumulation``) (memory-model §1, §3).

Sizes come from the rank's own trainable tensors, except DeepSpeed's IPG buckets, which
are allocated at their configured size whatever the model.
"""

from __future__ import annotations

from operator import attrgetter

from engine.ledger.held import HeldTensor
from engine.ledger.peaks.reduce_scatter import reduce_scatter_rows, regrouped_reduce_scatter_rows
from engine.ledger.peaks.titan_units import shards_one_rank
from engine.ledger.precision import DTYPE_BYTES, StateFormats
from engine.ledger.row import (
    ALL_PHASES,
    BACKWARD,
    FORWARD_BACKWARD,
    IN_LAYERS,
    Row,
    make_row,
)
from engine.plan import Plan
from engine.stacks.families import StrategyRule
from engine.units import ceil_div, fmt_count, round_up

MIB = 2**20

_GROUP_OF = attrgetter("group")
"""A held tensor's shard group size (read in C)."""


def bucket_rows(
    plan: Plan,
    held: list[HeldTensor],
    formats: StateFormats,
    rule: StrategyRule,
    shard: int,
    unsharded: tuple[HeldTensor, ...] | None = None,
) -> list[Row]:
    """Gradient communication buffers: DDP buckets, ZeRO buckets, FSDP reduce-scatter.

    ``unsharded``: ``held`` at shard groups of one (what ``held`` was regrouped from,
    cached: :func:`engine.ledger.states.persistent.stage_states`), when the caller has it:
    FSDP's reduce-scatter rows then work out what no group size changes once per
    placement (:mod:`engine.ledger.peaks.reduce_scatter`), not once per layout."""
    trainable = [t for t in held if t.trainable]
    if not trainable:
        return []
    replicas = max(map(_GROUP_OF, trainable), default=1)
    if rule.shards_nothing and rule.family not in ("fsdp1", "megatron") and replicas > 1:
        # FSDP1 NO_SHARD has no DDP reducer: its post-backward hook all-reduces each
        # unit's flat_param.grad in place (torch/distributed/fsdp/_runtime_utils.py);
        # nor has Megatron's DDP: it all-reduces its grad buffer's buckets in place
        # (families.MEGATRON_DDP)
        return [_ddp_row(plan, trainable, formats)]
    if rule.family == "deepspeed":
        return [
            _zero3_row(plan, trainable, formats)
            if rule.params
            else _zero_row(plan, trainable, formats)
        ]
    # torchtitan (0.3.0) applies fully_shard even to one rank (titan_units.shards_one_rank)
    titan = rule.family == "fsdp2" and shards_one_rank(plan)
    if rule.fsdp and rule.grads and (shard > 1 or titan):
        fsdp2 = rule.family == "fsdp2"
        if unsharded is not None:
            return regrouped_reduce_scatter_rows(plan, held, unsharded, formats, fsdp2, shard)
        return reduce_scatter_rows(plan, trainable, formats, fsdp2, shard)
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

    DeepSpeed 0.19.8 stage_1_and_2.py ``setup_buckets`` allocates one
    ``reduce_bucket_size`` buffer in the model dtype (with ``contiguous_gradients``, the
    default), and a second only with ``overlap_comm``; ``_release_ipg_buffers`` frees them
    at the end of backward. ``setup_buckets`` is called from ``process_gradients``, i.e.
    from the first parameter's gradient hook — after the loss's backward (the
    ``backward.start`` moment), so the buffers live only from the layers' backward on.
    The post-step all-gather writes into the flat 16-bit buffer itself (runtime/utils.py
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
        + f" = {fmt_count(n)} B, allocated at the first parameter's gradient (after the "
        "loss's backward), freed at the end of backward; the all-gather allocates nothing",
        source="deepspeed-zero12-buckets",
        phases=BACKWARD,
        backward=IN_LAYERS,
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
