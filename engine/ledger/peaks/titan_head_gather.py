"""The compute stream's free blocks beside torchtitan's plain loss at its backward, which
:func:`engine.ledger.peaks.runtime.loss_side` puts in FSDP2's ``hole``
(:class:`~engine.allocator.fsdp2_pools.Fsdp2Pools`)."""

from __future__ import annotations

from engine.ledger.activations.geometry import geometry
from engine.plan import Plan


def head_gather_hole(plan: Plan, logits: int, request: int) -> int:
    """The compute stream's free bytes beside torchtitan's plain loss at its backward:
    the 16-bit ``logits`` block ``del pred`` frees, and under tensor parallelism with
    sequence parallelism the output projection's all-gather buffer.

    torchtitan's ``apply_tp`` gives ``output`` ``ColwiseParallel(input_layouts=Shard(1))``
    (9dec370 ``parallelisms/parallelize_llama.py``): DTensor's ``Shard._to_replicate_tensor``
    gathers the final norm's sequence shards with ``all_gather_into_tensor`` into a
    (TP·b, s/TP, h) buffer and, the gather dim being 1, copies it into (b, s, h) with
    ``torch.cat(torch.chunk(…))`` (torch ``_functional_collectives.all_gather_tensor``;
    torch 2.13's ``_maybe_view_chunk_cat`` makes a view instead only when the local batch
    is 1). The cat's output is kept (the projection's input); the buffer, c·b·s·h, is
    freed at once, the block right after it taken by that output (best fit cuts a
    request from the start of a free block), so nothing can merge with it. The later
    requests before the peak are the logits and the fp32 T × V/TP ones (``request``): a
    buffer smaller than the logits stays free beside them (both count); one at least as
    large takes the logits, whose block is then inside it (only the buffer counts); one
    as large as a fp32 request is reused (only the logits count)."""
    buffer = buffer_bytes(plan)
    if not buffer or buffer >= request:
        return logits
    return buffer if buffer >= logits else buffer + logits


def buffer_bytes(plan: Plan) -> int:
    """The output projection's all-gather buffer, c·b·s·h rounded to the allocator's
    granularity (0 without TP + SP, or at local batch 1, where torch views the buffer)."""
    g = geometry(plan)
    if g.tp == 1 or not g.sp or g.micro_batch == 1:
        return 0
    gran = g.granularity
    return -(-g.tokens * g.hidden * g.compute_bytes // gran) * gran


def formula_note(plan: Plan, hole: int) -> str:
    """Words for the reserve row's formula where the freed-block term at the loss
    (FSDP2's ``hole``, named there after the 16-bit logits) holds the buffer too."""
    buffer = buffer_bytes(plan)
    if not hole or not buffer or hole < buffer:
        return ""
    return (
        f"; the freed-block term ({hole:,} B) counts, beside or around the 16-bit logits, "
        f"the output projection's SP all-gather buffer ({buffer:,} B, freed after its cat)"
    )
