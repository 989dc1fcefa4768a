"""Exact per-rank shards: FSDP2 dim-0 padding, placement by stage, TP splits."""

from __future__ import annotations

from ledger_plans import SMOL, make_plan, rows_of

ODD = {
    "family": "llama",
    "hidden": 24,
    "layers": 2,
    "heads": 3,
    "kv_heads": 1,
    "intermediate": 40,
    "vocab": 1001,
    "tied_embeddings": False,
}
"""A tiny model with awkward dims: h = 24, kv dim = 8, I = 40, V = 1001."""


def test_fsdp2_pads_each_tensor_to_ceil_d0_over_n() -> None:
    """FSDP2 over N = 16 ranks, fp32 params, no allocation rounding. Rank 0 holds
    ceil(d0/16) rows of each tensor:
      embed (1001, 24): ceil(1001/16) = 63 rows × 24 = 1512
      per layer: input norm (24,): 2; q (24, 24): 2 × 24 = 48; k (8, 24): 1 × 24 = 24;
        v: 24; o (24, 24): 48; post norm: 2; gate (40, 24): 3 × 24 = 72; up: 72;
        down (24, 40): 2 × 40 = 80 → 372 per layer, 744 for 2 layers
      final norm (24,): 2; lm_head (1001, 24): 1512
    Total 1512 + 744 + 2 + 1512 = 3770 elements × 4 B = 15,080 B, versus the naive
    P/N = 50,524 / 16 = 3157.75 elements — padding costs 19 % on this model.
    """
    rows = rows_of(
        make_plan(
            model__architecture=ODD, parallelism__dp=16, runtime__allocation_granularity_bytes=1
        )
    )
    assert rows["hbm.weights"] == 3770 * 4
    assert rows["hbm.grads"] == 3770 * 4
    assert rows["hbm.optimizer.exp_avg"] == 3770 * 4


def test_allocation_rounding_is_per_tensor() -> None:
    """Same model, N = 16, 512-byte rounding: each of the 21 shards rounds up to 512 B
    (the largest, 1512 × 4 = 6048 B, to 6144 B): embed 6144, lm_head 6144, and the 19
    small shards 512 B each → 12,288 + 9,728 = 22,016 B."""
    rows = rows_of(make_plan(model__architecture=ODD, parallelism__dp=16))
    assert rows["hbm.weights"] == 22_016


def test_pipeline_stages_hold_their_layers_and_ends() -> None:
    """SmolLM-135M (tied embeddings), PP = 2 with 15 layers each, DDP, fp32, no
    rounding. A layer has 576·2 (norms) + 576·576·2 (q, o) + 192·576·2 (k, v)
    + 1536·576·3 (MLP) = 3,540,096 params. Stage 0: embedding 49152·576 = 28,311,552
    + 15 layers = 81,412,992; the last stage also holds the final norm (576) and,
    embeddings being tied, its own copy of the embedding for the output: 81,413,568."""
    layer = 576 * 2 + 576 * 576 * 2 + 192 * 576 * 2 + 1536 * 576 * 3
    emb = 49152 * 576
    plan = make_plan(
        model__architecture=SMOL,
        parallelism__pp=2,
        parallelism__dp=1,
        parallelism__strategy="ddp",
        method__precision__policy="fp32",
        method__precision__compute_dtype="fp32",
        runtime__allocation_granularity_bytes=1,
    )
    assert layer == 3_540_096
    assert rows_of(plan, 0)["hbm.weights"] == (emb + 15 * layer) * 4 == 81_412_992 * 4
    assert rows_of(plan, 1)["hbm.weights"] == (emb + 15 * layer + 576) * 4


def test_tensor_parallel_splits_and_replicates_kv() -> None:
    """SmolLM-135M with TP = 9 (divides the 9 heads) and 3 KV heads: k and v cannot
    split 9 ways, so each rank keeps ceil(3/9) = 1 KV head (64 × 576). Per layer per
    rank: norms 576·2 (replicated); q 64·576; k 64·576; v 64·576; o 576·64;
    gate/up ceil(1536/9) = 171 × 576 each; down 576 × 171. Embedding (vocab-parallel)
    ceil(49152/9) = 5462 rows × 576 (tp_style vocab_parallel, as Megatron splits it);
    final norm 576. DDP, fp32, no rounding."""
    per_layer = 576 * 2 + 4 * 64 * 576 + 3 * 171 * 576
    total = 5462 * 576 + 30 * per_layer + 576
    rows = rows_of(
        make_plan(
            model__architecture=SMOL,
            parallelism__tp=9,
            parallelism__tp_style="vocab_parallel",
            parallelism__dp=1,
            parallelism__strategy="ddp",
            method__precision__policy="fp32",
            method__precision__compute_dtype="fp32",
            runtime__allocation_granularity_bytes=1,
        )
    )
    assert rows["hbm.weights"] == total * 4


def test_hsdp_divides_by_the_shard_group_not_the_world() -> None:
    """FSDP2 HSDP over DP = 32 with shard groups of 8: states divide by 8, not 32.
    Llama-3.1-8B fp32 shard: 8,030,261,248 / 8 × 4 B = 4,015,130,624 B."""
    rows = rows_of(
        make_plan(
            parallelism__strategy="fsdp2_hsdp", parallelism__dp=32, parallelism__shard_group_size=8
        )
    )
    assert rows["hbm.weights"] == 4_015_130_624
    default_group = rows_of(make_plan(parallelism__strategy="fsdp2_hsdp", parallelism__dp=32))
    assert default_group["hbm.weights"] == 4_015_130_624  # one node of 8 ranks


def test_zero3_persistence_threshold_keeps_small_params_whole() -> None:
    """ZeRO-3 with stage3_param_persistence_threshold 1e5: the 65 norm vectors of
    4096 elements stay unpartitioned. bf16 weights (amp_master), N = 8, no rounding:
    (8,030,261,248 − 65·4096)/8 + 65·4096 = 1,003,749,376 + 266,240 = 1,004,015,616
    elements × 2 B."""
    rows = rows_of(
        make_plan(
            parallelism__strategy="zero3",
            method__precision__policy="amp_master",
            method__precision__grad_dtype="bf16",
            runtime__allocation_granularity_bytes=1,
        )
    )
    assert rows["hbm.weights"] == 1_004_015_616 * 2
