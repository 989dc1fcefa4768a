"""FSDP1's wrap replayed (engine.allocator.construction ``wrap_cache``), hand-derived
for a Llama-2-7B LoRA over 2 ranks in bf16, from torch's
``torch/distributed/fsdp/_init_utils.py`` (``_move_module_to_device``,
``_sync_module_params_and_buffers`` with ``PARAM_BROADCAST_BUCKET_SIZE`` 250 MiB,
``FlatParamHandle.flatten_tensors_into_flat_param`` and ``shard``) and the caching
allocator's rules (≥ 10 MiB: a segment of its own rounded to 2 MiB; best fit; split).

A layer's parameters: q, k, v, o 4096² × 2 = 32 MiB each; gate, up, down 4096 × 11008 ×
2 = 86 MiB each (90,177,536 B); two norms 8 KiB each (the small pool's 2 MiB segment).
Flat parameter 404,766,720 B (386.02 MiB, segment 388 MiB), shard 202,383,360 B.
"""

from __future__ import annotations

from engine.allocator.construction import buckets, wrap_cache
from engine.units import MiB

H, FFN, V = 4096, 11008, 32_000
LAYER = (*[H * H * 2] * 4, *[H * FFN * 2] * 3, H * 2, H * 2)
ROOT = (V * H * 2, H * 2, V * H * 2)


def test_buckets_close_once_they_hold_250_mib() -> None:
    """q, k, v, o, gate, up reach 128 + 258 = 300 MiB ≥ 250 (the bucket closes there),
    down and the norms make the second; the root's embedding alone is 250 MiB."""
    assert buckets(LAYER) == [300 * MiB, H * FFN * 2 + 2 * H * 2]
    assert buckets(ROOT) == [V * H * 2, H * 2 + V * H * 2]


def test_a_layer_leaves_its_originals_and_flat_parameter_and_the_buckets_remainders() -> None:
    """Without sync: the originals (4 × 32 + 3 × 86 = 386 MiB), the flat parameter's
    388 MiB segment (the shard took a new 194 MiB segment: nothing free was large enough
    while the flat parameter and originals lived) and the norms' 2 MiB: 776 MiB.
    With sync: bucket 1 (300 MiB) and bucket 2 (86.02 MiB → an 88 MiB segment) are
    freed before the flat parameter, whose 386.02 MiB fits neither, so it takes a
    388 MiB segment; the shard then splits bucket 1's segment (300 − 193.008 = 106.99
    MiB left): 386 + 88 + 388 + 106.99 + 2 = 970.99 MiB. Later layers reuse exactly these
    blocks (their shards take new segments, live as the sharded weights), so 32 layers
    leave the same."""
    assert wrap_cache((LAYER,), 2, False) == 776 * MiB
    assert wrap_cache((LAYER,), 2, True) == 1_018_159_104  # 970.99 MiB
    assert wrap_cache((LAYER,) * 32, 2, True) == wrap_cache((LAYER,), 2, True)


def test_the_root_unit_adds_its_own_segments() -> None:
    """With sync, after the layers: the embedding (250 MiB) splits the free 388 MiB
    block, lm_head takes a new 250 MiB segment; the buckets [embedding] (250 MiB) and
    [norm, lm_head] (250.008 → 252 MiB) take two more; the flat parameter (500.008 MiB)
    a 502 MiB one; the shard (250.004 MiB) fits only the 252 MiB block (leaving 1.996
    MiB). Added: 250 + 250 + 1.996 + 502 = 1003.996 MiB → 1974.99 MiB in all
    (2,070,925,312 B). Without sync: 1,604,317,184 B (1530 MiB)."""
    units = (LAYER,) * 32 + (ROOT,)
    assert wrap_cache(units, 2, True) == 2_070_925_312
    assert wrap_cache(units, 2, True) - wrap_cache((LAYER,), 2, True) == 1_052_766_208
    assert wrap_cache(units, 2, False) == 1_604_317_184


def test_no_shard_keeps_the_flat_parameter_whole() -> None:
    """NO_SHARD (world 1): the flat parameter is the weight; the originals' blocks
    (386 MiB), the norms' small segment (2 MiB) and the flat parameter's segment tail
    (388 MiB − 404,766,720 B = 2,080,768 B, split off as it exceeds 1 MiB) stay cached."""
    assert wrap_cache((LAYER,), 1, False) == 386 * MiB + 2 * MiB + 2_080_768


def test_no_shard_with_sync_caches_the_buckets_beside_the_originals() -> None:
    """NO_SHARD with sync: the buckets (300 MiB, 86.02 → 88 MiB) are freed before the
    flat parameter (388 MiB segment, kept, its 2,080,768 B tail free) and fit no later
    flat parameter, while every later layer reuses them and the originals' blocks:
    386 + 300 + 88 + 2 MiB + 2,080,768 B = 815,775,744 B after one layer, and each kept
    flat parameter's segment adds its tail: + 31 × 2,080,768 = 880,279,552 B after 32."""
    assert wrap_cache((LAYER,), 1, True) == (386 + 300 + 88 + 2) * MiB + 2_080_768
    assert wrap_cache((LAYER,), 1, True) == 815_775_744
    assert wrap_cache((LAYER,) * 32, 1, True) == 815_775_744 + 31 * 2_080_768 == 880_279_552


def test_a_no_shard_plan_carries_its_replayed_wrap_and_the_loss_floor() -> None:
    """Answer.AI's LoRA under FSDP1 NO_SHARD ("DDP"), micro-batch 4, s 2048, with
    sync_module_states: the side bytes carry the replay of its 32 layers and root
    (no all-gather, so no side-pool unit), and the loss's backward reserves its
    allocated bytes + that cache + the 16-bit logits 4·2048·32000·2 = 524,288,000 B
    (the shifted log-probs 4·2047·32000·4 = 1,048,064,000 B exceed the root's
    524,296,192 B: tests/engine/allocator/test_loss_floor.py)."""
    from engine.estimate import estimate
    from engine.plan import with_values
    from engine.stacks.defaults import resolved
    from tests.engine.allocator.published import ANSWERAI_7B_LORA, plan_of

    sets = {**ANSWERAI_7B_LORA, "batch.seq_len": 2048, "parallelism.strategy": "fsdp1_no_shard"}
    plan = resolved(
        with_values(
            plan_of("llama-2-7b", sets),
            {
                "batch.micro_batch": 4,
                "runtime.kept_logits": "fp32",
                "parallelism.knobs.fsdp1_sync_module_states": True,
            },
        )
    )
    st = estimate(plan).heaviest
    side = st.totals.side
    cache = wrap_cache((LAYER,) * 32 + (ROOT,), 1, True)
    assert side.init == (cache, cache) and side.unit == 0  # type: ignore[attr-defined]
    assert side.logits == (524_288_000, 1_048_064_000)  # type: ignore[attr-defined]
    at = st.totals.at_loss("backward")
    assert at is not None and st.reserved_peak.low == at[0] + cache + 524_288_000


def test_cpu_offload_frees_each_shard_into_the_cache() -> None:
    """``CPUOffload(offload_params=True)``: the shard moves to the CPU
    (``flat_param_to(cpu)``), so its 202,383,360 B block rejoins bucket 1's segment:
    one layer with sync leaves 1,018,159,104 + 202,383,360 = 1,220,542,464 B (the whole
    300 MiB segment free again)."""
    assert wrap_cache((LAYER,), 2, True, offload=True) == 1_018_159_104 + 202_383_360
