"""The end of backward in order (engine.ledger.peaks.backward_grads, buckets, gathered).

The default plan is Llama-3.1-8B under FSDP2 over 8 ranks, fp32 parameters and
gradients (MixedPrecisionPolicy bf16 compute, fp32 reduce), 32 decoder layers of
218,112,000 elements, an untied 128,256 × 4,096 = 525,336,576-element embedding.
"""

from __future__ import annotations

from engine.estimate import estimate
from engine.ledger.row import Row
from engine.plan import default_plan, with_values

LAYER, EMBED = 218_112_000, 525_336_576


def _rows(**changes: object) -> dict[str, Row]:
    plan = with_values(default_plan(), dict(changes)) if changes else default_plan()
    return {r.id: r for r in estimate(plan).rows}


def test_backward_end_holds_every_gradient_but_the_first_layers_and_the_embeddings() -> None:
    """AccumulateGrad (torch/csrc/autograd/functions/accumulate_grad.h) allocates a
    gradient when backward reaches it; FSDP2 makes a unit's fp32 shard after its
    reduce-scatter. At the first layer's first backward ops its own gradients and the
    untied embedding's (made after it) are missing: (218,112,000 + 525,336,576) × 4 B ÷ 8
    = 371,724,288 B fewer than the whole gradient row, which is live from the step on."""
    rows = _rows()
    grads, before = rows["hbm.grads"], rows["hbm.grads.before_first_layer"]
    assert grads.low - before.low == (LAYER + EMBED) * 4 // 8 == 371_724_288
    assert before.moments == frozenset({"backward.end"})
    assert "backward.end" not in grads.moments and "optimizer" in grads.moments


def test_accumulation_and_flat_buffers_keep_the_whole_gradient_row_at_backward_end() -> None:
    """Under gradient accumulation every earlier sum is live at backward.end; ZeRO-2's
    flat gradient partition is one allocation: neither splits the row."""
    for changes in ({"batch.grad_accum": 2}, {"parallelism.strategy": "zero2"}):
        rows = _rows(**changes)
        assert "hbm.grads.before_first_layer" not in rows
        g = rows["hbm.grads"]
        assert g.live_at("backward.end", True)


def test_fsdp2_holds_one_reduce_scatter_input_and_no_prefetch_at_the_first_layer() -> None:
    """foreach_reduce (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py) copies a
    unit's gradients into one fp32 input, 218,112,000 × 4 = 872,448,000 B, kept until
    the next unit's post-backward: none during the last layer's backward, one from then
    on. At the first layer nothing is left to prefetch, so the all-gather buffer is gone;
    at the loss's backward it still holds the prefetched last layer."""
    rows = _rows()
    rs, ag = rows["hbm.buckets.reduce_scatter"], rows["hbm.gathered.all_gather_buffer"]
    assert rs.low == rs.high == LAYER * 4 == 872_448_000
    assert rs.moments == frozenset({"backward.middle", "backward.end"})
    assert "backward.end" not in ag.moments and "backward.start" in ag.moments
    # the head's saved tensors (final norm, lm_head input) go with backward's first ops
    assert rows["hbm.activations.saved.head"].moments == frozenset({"forward", "backward.start"})
