"""torchtitan at one rank: FSDP2 all the same, hand-derived.

torchtitan 0.3.0 applies ``fully_shard`` even to a shard group of one
(``models/llama3/parallelize.py``: "Always run apply_fsdp_to_decoder -- with
shard_degree=1 it is a no-op for the all-gather but still installs the
MixedPrecisionPolicy"), so its bf16 unsharded units and fp32 reduce buffers exist as at
any world size: the ledger counts its FSDP2 rows at a shard group of 1 under torchtitan's
profile (not under other stacks, whose plans at DP 1 do not wrap). And torch 2.13's
``foreach_reduce`` (``_fully_shard/_fsdp_collectives.py``) at world size 1 keeps the
fp32 reduce-scatter input, a full-size fp32 output, and
``reduce_scatter_input / gradient_divide_factor`` — a third copy, as torchtitan sets
``gradient_divide_factor`` 1.0 (``distributed/fsdp.py``).

Llama-3.1-8B's head unit (norm + lm_head) at s 512, micro-batch 1, eager loss: one fp32
copy (V·h + h)·4 = (128,256·4,096 + 4,096)·4 = 2,101,362,688 B; three: 6,304,088,064;
the regather moment, unit (V·h + h)·2 = 1,050,681,344 + one copy = 3,152,044,032, is
smaller; the eager loss's backward.start 3·T·V·4 = 3·512·128,256·4 = 788,004,864; so the
head row adds 6,304,088,064 − 788,004,864 = 5,516,083,200 B. Traced (tests/trace, 2
layers): 31,221,448,192 B at lm_head's backward against the ledger's 31,220,145,827 –
31,224,861,798 (was −21.0 % before these rows).
"""

from __future__ import annotations

from tests.engine.ledger.test_torchtitan_profile import rows_of, titan


def _one_rank(**changes: object) -> dict[str, object]:
    return rows_of(
        titan(
            parallelism__dp=1,
            batch__seq_len=512,
            batch__micro_batch=1,
            runtime__loss_impl="eager",
            **changes,
        )
    )


def test_world_one_reduce_holds_three_fp32_copies_of_the_head() -> None:
    row = _one_rank()["hbm.gathered.head_regather"]
    one = (128_256 * 4096 + 4096) * 4
    assert one == 2_101_362_688
    assert row.low == 3 * one - 3 * 512 * 128_256 * 4 == 5_516_083_200


def test_torchtitan_keeps_its_fsdp2_units_at_one_rank() -> None:
    """The gathered head unit, a layer's bf16 all-gather buffer and its fp32
    reduce-scatter input exist at DP 1 under torchtitan — a Llama-3.1-8B layer is
    4096·(4096 + 2·1024 + 4096) + 3·14,336·4096 + 2·4096 = 218,112,000 parameters:
    436,224,000 B in bf16, 872,448,000 B in fp32; a pytorch-stack plan at DP 1 counts
    none of them."""
    titan_rows = _one_rank()
    layer = 4096 * (4096 + 2 * 1024 + 4096) + 3 * 14_336 * 4096 + 2 * 4096
    assert layer == 218_112_000
    assert titan_rows["hbm.gathered.root"].low == (128_256 * 4096 + 4096) * 2
    assert titan_rows["hbm.gathered.all_gather_buffer"].low == layer * 2
    assert titan_rows["hbm.buckets.reduce_scatter"].low == layer * 4
    plain = _one_rank(stack__name="pytorch")
    assert "hbm.gathered.root" not in plain
    assert "hbm.gathered.head_regather" not in plain
