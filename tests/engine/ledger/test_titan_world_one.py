"""torchtitan at one rank and under TP: its head unit's FSDP2 rows, hand-derived.

torchtitan 0.3.0 applies ``fully_shard`` even to a shard group of one
(``models/llama3/parallelize.py``: "Always run apply_fsdp_to_decoder -- with
shard_degree=1 it is a no-op for the all-gather but still installs the
MixedPrecisionPolicy"), so its bf16 unsharded units and fp32 reduce buffers exist as at
any world size: the ledger counts its FSDP2 rows at a shard group of 1 under torchtitan's
profile from 0.3.0 (0.2.0's ``models/llama3/infra/parallelize.py`` wraps only ``if
parallel_dims.fsdp_enabled``; other stacks' plans at DP 1 do not wrap). torch 2.13's
``foreach_reduce`` (``_fully_shard/_fsdp_collectives.py``) at world size 1 keeps the fp32
reduce-scatter input, a full-size fp32 output, and ``reduce_scatter_input /
gradient_divide_factor`` — a third copy, as torchtitan sets ``gradient_divide_factor``
1.0 (``distributed/fsdp.py``).

Llama-3.1-8B's head unit (norm + lm_head) at s 512, micro-batch 1, eager loss: one fp32
copy (V·h + h)·4 = (128,256·4,096 + 4,096)·4 = 2,101,362,688 B; the 16-bit unit
(V·h + h)·2 = 1,050,681,344; the eager loss's backward.start 3·T·V·4 = 3·512·128,256·4 =
788,004,864. The regather row (every DP, no DP read: the layout floors take the activation
rows at DP 1 as a lower bound at every DP) is unit + one copy − loss = 2,364,039,168; at a
shard group of 1 the reduce's three copies, 6,304,088,064 − 788,004,864 = 5,516,083,200,
exceed it by 3,152,044,032 (``hbm.buckets.head_reduce_world_one``, DP 1 only, built only
with the head's placed tensors so the floors' DP-1 activation sums leave it out). Traced
(tests/trace, 2 layers, world 1): 31,221,448,192 B at lm_head's backward, inside the
ledger's range (was −21.0 % before these rows).
"""

from __future__ import annotations

from engine.ledger.row import Row
from tests.engine.ledger.test_torchtitan_profile import rows_of, titan

HEAD = 128_256 * 4096 + 4096  # lm_head + final norm elements
LOSS = 3 * 512 * 128_256 * 4  # the eager loss's fp32 log-probs and two T × V gradients


def _rows(dp: int, **changes: object) -> dict[str, Row]:
    return rows_of(
        titan(
            parallelism__dp=dp,
            batch__seq_len=512,
            batch__micro_batch=1,
            runtime__loss_impl="eager",
            **changes,
        )
    )


def test_world_one_reduce_holds_three_fp32_copies_of_the_head() -> None:
    rows = _rows(1)
    one, unit = HEAD * 4, HEAD * 2
    assert (one, unit, LOSS) == (2_101_362_688, 1_050_681_344, 788_004_864)
    regather = rows["hbm.gathered.head_regather"].low
    assert regather == unit + one - LOSS == 2_364_039_168
    extra = rows["hbm.buckets.head_reduce_world_one"].low
    assert regather + extra == 3 * one - LOSS == 5_516_083_200


def test_the_regather_row_reads_no_dp() -> None:
    """The activation row is the same at DP 2 (what the layout floors rely on); the
    world-1 copies are not there."""
    rows = _rows(2)
    assert rows["hbm.gathered.head_regather"].low == 2_364_039_168
    assert "hbm.buckets.head_reduce_world_one" not in rows


def test_torchtitan_keeps_its_fsdp2_units_at_one_rank() -> None:
    """The gathered head unit, a layer's bf16 all-gather buffer and its fp32
    reduce-scatter input exist at DP 1 under torchtitan 0.3.0 — a Llama-3.1-8B layer is
    4096·(4096 + 2·1024 + 4096) + 3·14,336·4096 + 2·4096 = 218,112,000 parameters:
    436,224,000 B in bf16, 872,448,000 B in fp32; a pytorch-stack plan at DP 1, and
    torchtitan 0.2.0 (no ``fully_shard`` at one rank), count none of them."""
    titan_rows = _rows(1)
    layer = 4096 * (4096 + 2 * 1024 + 4096) + 3 * 14_336 * 4096 + 2 * 4096
    assert layer == 218_112_000
    assert titan_rows["hbm.gathered.root"].low == HEAD * 2
    assert titan_rows["hbm.gathered.all_gather_buffer"].low == layer * 2
    assert titan_rows["hbm.buckets.reduce_scatter"].low == layer * 4
    for other in (_rows(1, stack__name="pytorch"), _rows(1, runtime__torchtitan_version="0.2.0")):
        assert "hbm.gathered.root" not in other
        assert "hbm.gathered.head_regather" not in other
        assert "hbm.buckets.reduce_scatter" not in other
        assert "hbm.buckets.head_reduce_world_one" not in other


def test_tensor_parallel_regathers_its_vocab_share() -> None:
    """Under TP 2 lm_head is ``ColwiseParallel`` (torchtitan ``apply_non_moe_tp``): the
    head unit holds ⌈128,256 ÷ 2⌉ = 64,128 rows and the whole norm, (64,128·4,096 +
    4,096)·2 = 525,344,768 B gathered again, next to its fp32 scatter input
    (64,128·4,096 + 4,096)·4 = 1,050,689,536; DTensor's ``loss_parallel`` backward
    (``torch/distributed/tensor/parallel/loss.py``) holds four fp32 T × V/2 tensors — the
    log-probs, ``zeros_like``, ``grad + exp``, the product — 4·512·64,128·4 =
    525,336,576, gone by norm's backward: the row is 1,050,697,728 B (the TP grid case
    went −5.9 % → −0.4 % when this was counted)."""
    rows = _rows(2, parallelism__tp=2)
    half = 64_128 * 4096 + 4096
    loss = 4 * 512 * 64_128 * 4
    assert rows["hbm.gathered.root"].low == half * 2 == 525_344_768
    assert rows["hbm.loss.saved"].low + rows["hbm.loss.backward_transient"].low == loss
    assert rows["hbm.gathered.head_regather"].low == half * 2 + half * 4 - loss
    assert rows["hbm.gathered.head_regather"].low == 1_050_697_728
