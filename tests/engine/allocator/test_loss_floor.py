"""The eager loss's reserve under FSDP1 (``engine.allocator.reserve.loss_floor``),
hand-derived from the caching allocator's best fit and Hugging Face's loss.

``c10/cuda/CUDACachingAllocator.cpp`` ``get_free_block`` serves a request from the
smallest free block of its pool at least as large (``pool.blocks.lower_bound``), else
``alloc_block`` maps a new segment. FSDP1's construction leaves blocks no larger than a
layer unit's flat parameter or the root unit's (``fsdp1_init_cache``); the loss's fp32
T × V tensors of a large micro-batch are larger, so none of that cache serves them, and
the 16-bit logits' block ``logits.float()`` frees is half their size: the reserved bytes
at the loss's backward are its allocated bytes + the whole construction cache + that
block.

Llama-2-7B LoRA (Answer.AI's plan, V 32,000, bf16), micro-batch 6, s 2048, the loop
keeping the fp32 output (transformers <= 4.44): the smallest fp32 request is the shifted
log-probs 6·2047·32000·4 = 1,572,096,000 B > the root unit 524,296,192 B > a layer unit
404,766,720 B; the 16-bit logits 6·2048·32000·2 = 786,432,000 B.
"""

from __future__ import annotations

from engine.allocator.reserve import SideBytes, loss_floor, with_logits
from engine.estimate import estimate
from engine.plan import with_values
from engine.stacks.defaults import resolved
from tests.engine.allocator.published import ANSWERAI_7B_LORA, plan_of

INIT = (1_604_317_184, 2_070_925_312)  # the wrap's replay, test_construction.py
UNIT, ROOT = 404_766_720, 524_296_192
BLOCK, REQUEST = 786_432_000, 1_572_096_000
GRADS = 159_907_840
"""The adapters' sharded bf16 gradients FSDP1's post-backward stream pool keeps
(test_fsdp1_grad_pool.py), for this plan's targets: r 64 on q, k, v, o (64·4096 +
4096·64 each), gate, up (64·4096 + 11008·64 each), down (64·11008 + 4096·64) =
4,997,120 per layer × 32 layers ÷ 2 ranks × 2 B."""


def lora(micro_batch: int, **extra: object) -> object:
    base = plan_of("llama-2-7b", {**ANSWERAI_7B_LORA, "batch.seq_len": 2048})
    changes = {"batch.micro_batch": micro_batch, "runtime.kept_logits": "fp32", **extra}
    return resolved(with_values(base, changes))


def test_the_floor_is_the_loss_moment_plus_the_whole_cache_and_the_16_bit_block() -> None:
    side = SideBytes(1_000, INIT, UNIT, ROOT)
    with_loss = with_logits(side, BLOCK, REQUEST)
    assert isinstance(with_loss, SideBytes) and with_loss.logits == (BLOCK, REQUEST)
    assert loss_floor(with_loss, (10, 20)) == (10 + INIT[0] + BLOCK, 20 + INIT[1] + BLOCK)
    # a request the root unit's cached block can hold: the cache is reused, no floor
    assert loss_floor(with_logits(side, BLOCK, ROOT), (10, 20)) is None
    # no construction cache (FSDP2, ZeRO): nothing is carried
    assert with_logits(SideBytes(1_000), BLOCK, REQUEST) == 1_000
    assert loss_floor(with_logits(SideBytes(1_000), BLOCK, REQUEST), (10, 20)) is None


def test_the_answerai_lora_at_micro_batch_6_reserves_the_floor() -> None:
    st = estimate(lora(6)).heaviest
    t = st.totals
    assert t.side.logits == (BLOCK, REQUEST)  # type: ignore[attr-defined]
    assert st.peak_phase == "backward"
    at = t.at_loss("backward")
    assert at is not None
    # + the post-backward stream's freed gradients, reserved beside the loss
    assert st.reserved_peak.low == at[0] + INIT[0] + BLOCK + GRADS
    assert st.reserved_peak.high >= at[1] + INIT[1] + BLOCK + GRADS


def test_small_batches_and_expandable_segments_keep_the_old_reserve() -> None:
    """At micro-batch 1 the shifted log-probs (2047·32000·4 = 262,016,000 B) fit the
    root's cached block; with expandable segments a request grows the segment instead
    (not modelled here): in both the loss adds no floor."""
    one = estimate(lora(1)).heaviest
    assert one.totals.side.logits == (131_072_000, 262_016_000)  # type: ignore[attr-defined]
    at_one = one.totals.at_loss("backward")
    assert at_one is not None and loss_floor(one.totals.side, at_one) is None
    exp = estimate(lora(6, **{"runtime.expandable_segments": True})).heaviest
    at = exp.totals.at_loss("backward")
    assert at is not None and exp.reserved_peak.low < at[0] + INIT[0] + BLOCK
