"""The output projection's all-gather buffer beside torchtitan's plain loss under TP + SP
(engine/ledger/peaks/titan_head_gather.py).

torchtitan 9dec370 ``parallelisms/parallelize_llama.py`` ``apply_tp``: ``output`` is
``ColwiseParallel(input_layouts=Shard(1), output_layouts=Shard(-1))``, so DTensor's
``Shard._to_replicate_tensor`` all-gathers the final norm's sequence shards (torch
``_functional_collectives.all_gather_tensor``: ``all_gather_into_tensor`` into a
(TP·b, s/TP, h) buffer, then ``torch.cat(torch.chunk(res, TP, dim=0), dim=1)`` — a
copy; torch 2.13's ``_maybe_view_chunk_cat`` views instead only at local batch 1). The
buffer is freed right after the cat, which took the block after it, so it stays a hole
of c·b·s·h unless a later request before the peak fits: the 16-bit logits (c·T·V/TP,
``del pred`` frees them before the loss's backward) or the loss's fp32 T × V/TP blocks.

The published 2D row (Llama-3.1-70B, FSDP 32 × TP 8, s 8192, micro-batch 16, bf16):
T = 131,072, h 8192, V/TP = 128,256 / 8 = 16,032. Buffer 131,072·8192·2 = 2,147,483,648;
logits 131,072·16,032·2 = 4,202,692,608; one fp32 request 8,405,385,216. The buffer is
smaller than the logits: both stay free, 6,350,176,256 B. Llama-3.1-405B (h 16,384) at
micro-batch 2, s 8192: T = 16,384, buffer 16,384·16,384·2 = 536,870,912 ≥ the logits
16,384·16,032·2 = 525,336,576 (< the fp32 request 1,050,673,152): the logits are cut
from the buffer's block, which alone stays free.
"""

from __future__ import annotations

from typing import Any

from engine.estimate import estimate
from engine.ledger.peaks.titan_head_gather import head_gather_hole
from engine.plan import Plan, with_values
from engine.presets import plan_for_model_preset
from engine.stacks.defaults import resolved

TITAN_2D: dict[str, Any] = {
    "stack.name": "torchtitan",
    "parallelism.strategy": "fsdp2",
    "parallelism.dp": 32,
    "parallelism.tp": 8,
    "parallelism.sequence_parallel": True,
    "batch.seq_len": 8192,
    "batch.micro_batch": 16,
    "method.recompute.policy": "full",
    "runtime.loss_impl": "eager",
    "runtime.torchtitan_version": "0.0.2",
}


def plan(preset: str = "llama-3.1-70b", **changes: Any) -> Plan:
    sets = {**TITAN_2D, **{k.replace("__", "."): v for k, v in changes.items()}}
    return resolved(with_values(plan_for_model_preset(preset), sets))


LOGITS_70B = 131_072 * 16_032 * 2
FP32_70B = 131_072 * 16_032 * 4


def test_the_2d_row_leaves_the_buffer_beside_the_logits() -> None:
    hole = head_gather_hole(plan(), LOGITS_70B, FP32_70B)
    assert hole == 131_072 * 8192 * 2 + LOGITS_70B == 6_350_176_256


def test_a_buffer_as_large_as_the_logits_holds_them() -> None:
    logits, request = 16_384 * 16_032 * 2, 16_384 * 16_032 * 4
    hole = head_gather_hole(plan("llama-3.1-405b", batch__micro_batch=2), logits, request)
    assert hole == 16_384 * 16_384 * 2 == 536_870_912


def test_no_buffer_without_the_copy() -> None:
    """No TP, no SP (the output's input is already whole) or local batch 1 (a view):
    the logits alone."""
    assert head_gather_hole(plan(parallelism__tp=1, parallelism__dp=256), 7, 9) == 7
    assert head_gather_hole(plan(parallelism__sequence_parallel=False), 7, 9) == 7
    assert head_gather_hole(plan(batch__micro_batch=1), 7, 9) == 7


def test_a_buffer_as_large_as_a_loss_request_is_reused() -> None:
    assert head_gather_hole(plan(), LOGITS_70B, 131_072 * 8192 * 2) == LOGITS_70B


def test_the_reserve_row_says_what_the_freed_block_term_holds() -> None:
    """The 2D row's reserve formula names the buffer beside the logits (6,350,176,256 B
    in all, the buffer 2,147,483,648 B); without TP it has no such words."""
    for made, words in ((plan(), True), (plan(parallelism__tp=1, parallelism__dp=256), False)):
        rows = {r.id: r for r in estimate(made).heaviest.rows}
        text = rows["hbm.runtime.allocator_reserve"].formula
        assert ("SP all-gather buffer (2,147,483,648 B" in text) is words
        assert ("(6,350,176,256 B)" in text) is words
