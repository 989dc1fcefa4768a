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
    g = geometry(plan)
    if g.tp == 1 or not g.sp or g.micro_batch == 1:
        return logits
    gran = g.granularity
    buffer = -(-g.tokens * g.hidden * g.compute_bytes // gran) * gran
    if buffer >= request:
        return logits
    return buffer if buffer >= logits else buffer + logits
