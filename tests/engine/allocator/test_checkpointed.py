"""The compute stream's cache at the eager loss after a checkpointed forward
(``engine.allocator.checkpointed``), hand-derived from the caching allocator's best fit.

``c10/cuda/CUDACachingAllocator.cpp``: a request of 10 MiB or more gets a segment of its
own rounded to 2 MiB (``kRoundLarge``) unless a free block at least as large exists
(``get_free_block``: the smallest, ``pool.blocks.lower_bound``), which is split when
more than 1 MiB would be left (``should_split``); a request of at most 1 MiB takes a
2 MiB small-pool segment. Freed neighbours merge.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.allocator.checkpointed import CheckpointedForward, loss_cache
from engine.allocator.reserve import SideBytes, loss_floor, with_forward, with_logits
from engine.estimate import estimate
from engine.units import KiB, MiB
from tests.engine.allocator.test_loss_floor import BLOCK, GRADS, INIT, REQUEST, ROOT, UNIT, lora


def plain(batch: int, seq: int, hidden: int, vocab: int, layers: int) -> CheckpointedForward:
    """A plain decoder (4 heads, MLP 2 × hidden), no adapters, bf16."""
    return CheckpointedForward(
        batch=batch,
        seq=seq,
        hidden=hidden,
        q_width=hidden,
        kv_width=hidden,
        heads=4,
        inter=2 * hidden,
        vocab=vocab,
        layers=layers,
        lora_rank=0,
        targets=frozenset(),
        dropout=False,
        qlora=False,
    )


def test_no_layer_the_loss_fits_none_of_the_forwards_freed_blocks() -> None:
    """b 2, s 2048 (T 4096), h 4096, V 8192, no layer, no wrap. Requests in
    ``LlamaForCausalLM.forward`` order, MiB (A = T·h·2 = 32, the fp32 norm tensors 64,
    the 16-bit logits T·V·2 = 64, the fp32 logits 128, the shifted (T − 2)·V·4 =
    134,152,192 B, a 128 MiB segment whose 64 KiB tail is not split off):

    embedding x 32 (S1) · fp32 input 64 (S2, kept) · pow 64 (S3) · variance 16 KiB
    (small segment S4, 2 MiB) · pow freed · product 64 (reuses S3) · downcast 32 (S5) ·
    product freed · output 32 (cut from S3: 32 left free) · downcast and x freed (S1, S5
    free) · 16-bit logits 64 (nothing free that large: S6) · fp32 logits 128 (S7) ·
    16-bit freed · shifted 128 (S8) · log-probs 128 (S9) · shifted and norm output freed
    (S8 free, S3 whole again) · nll grad (reuses S8) · log_softmax grad 128 (S10).

    Reserved 32 + 64 + 64 + 2 + 32 + 64 + 128 × 4 = 770 MiB; allocated the fp32 input
    64, the variance 16 KiB, the fp32 logits and the three shifted-size tensors 4 × 128:
    576 MiB + 16 KiB. Cached: S1, S5 (32 each), S3, S6 (64 each) and S4's rest."""
    got = loss_cache((), 2, True, plain(2, 2048, 4096, 8192, 0))
    assert got == 32 * MiB + 32 * MiB + 64 * MiB + 64 * MiB + 2 * MiB - 16 * KiB


@settings(max_examples=20, deadline=None)
@given(
    batch=st.integers(1, 3),
    seq=st.sampled_from([1024, 2048]),
    hidden=st.sampled_from([1024, 2048]),
    layers=st.integers(0, 3),
)
def test_the_16_bit_logits_block_is_always_kept(
    batch: int, seq: int, hidden: int, layers: int
) -> None:
    """``logits.float()`` frees the 16-bit logits (T·V·2, here ≥ 16 MiB) and every later
    request of the loss is fp32 T × V, twice as large: that block is cached at the loss
    whatever the forward before it left."""
    vocab = 8192
    got = loss_cache((), 2, True, plain(batch, seq, hidden, vocab, layers))
    assert got >= batch * seq * vocab * 2


def test_the_floor_high_end_adds_the_replay_and_the_side_pools_units() -> None:
    """High: the loss moment + the larger of (construction cache + 16-bit block) and the
    replayed cache, + the unshard stream's layer units (the gathered bytes but the
    root's, and one unit more); the low end keeps the construction cache and the block."""
    side = with_logits(SideBytes(ROOT + 2 * UNIT, INIT, UNIT, ROOT), BLOCK, REQUEST)
    fwd = 5 * 2**30
    got = loss_floor(with_forward(side, fwd), (10, 20))
    assert got == (10 + INIT[0] + BLOCK, 20 + fwd + 2 * UNIT + UNIT)
    # a replay below the construction cache and block leaves the old floor
    assert loss_floor(with_forward(side, 1), (10, 20)) == (
        10 + INIT[0] + BLOCK,
        20 + INIT[1] + BLOCK,
    )


def test_answerai_lora_bs6_keeps_the_forwards_blocks_beside_the_loss() -> None:
    """Answer.AI's Llama-2-7B LoRA at micro-batch 6 (2 × 3090, published reserved
    21.35 GiB): each checkpointed layer's output (6·2048·4096·2 = 96 MiB) is made while
    the residual stream's blocks are in use, so it is cut out of a freed MLP block
    (6·2048·11008·2 = 258 MiB) and the next layer's MLP maps a new one; the forward
    leaves more cached than FSDP1's construction cache and the 16-bit block, and none of
    it fits the loss's 1.5 GB fp32 requests. Beside them the post-backward stream's pool
    keeps the adapters' sharded gradients the last step's ``zero_grad`` freed (GRADS)."""
    st_ = estimate(lora(6)).heaviest
    side = st_.totals.side
    fwd = getattr(side, "forward", 0)
    assert fwd > INIT[1] + BLOCK
    at = st_.totals.at_loss("backward")
    assert at is not None
    # the root and the last layer's unit its BACKWARD_PRE prefetches (fsdp1_prefetch)
    # are live in the unshard pool at the loss: counted in ``at``, not again as pools
    assert getattr(side, "ahead", 0) == UNIT
    pools = int(side) - ROOT - UNIT + UNIT
    assert st_.reserved_peak.high == at[1] + fwd + pools + GRADS
    assert st_.reserved_peak.low == at[0] + INIT[0] + BLOCK + GRADS
