"""transformers' per-layer rotary cos / sin caches under old releases
(engine/ledger/activations/hf_rope_cache.py), hand-derived.

transformers 4.37.2 ``models/llama/modeling_llama.py`` ``LlamaRotaryEmbedding.__init__``
calls ``_set_cos_sin_cache(seq_len=max_position_embeddings,
dtype=torch.get_default_dtype())``, which registers ``cos_cached`` and ``sin_cached``:
``emb = cat((freqs, freqs), -1)`` of ``(max_position_embeddings, dim)``; 4.38.2 – 4.40.0
register the same tensors as ``_cos_cached`` / ``_sin_cached``; 4.41.0 none. Every
``LlamaAttention._init_rope`` builds its own module, and ``from_pretrained(torch_dtype=
bf16)`` makes bf16 the default dtype while it runs
(``PreTrainedModel._set_default_torch_dtype``).

Llama-2-7B (max_position_embeddings 4096, head_dim 4096 / 32 = 128, 32 layers), bf16:
one tensor 4096 × 128 × 2 = 1,048,576 B (a multiple of 512: no rounding), two per layer
2,097,152 B, 32 layers 67,108,864 B (64 MiB) on every rank — buffers, which FSDP1 does not
shard. Mistral-7B (``MistralRotaryEmbedding``, the same code through 4.41.0; its
max_position_embeddings 32,768, head_dim 128): 32,768 × 128 × 2 × 2 = 16,777,216 B a
layer, × 32 = 536,870,912 B.
"""

from __future__ import annotations

from engine.estimate import estimate
from engine.ledger.activations.hf_rope_cache import cache_bytes_per_layer, keeps_rope_caches
from engine.ledger.row import Row
from engine.plan import Plan, with_values
from engine.presets import plan_for_model_preset

ID = "hbm.buffers.rope_cache"
BF16 = {"method.precision.policy": "pure_16bit"}  # from_pretrained(torch_dtype=bf16)


def _rows(preset: str, values: dict[str, object]) -> dict[str, Row]:
    plan: Plan = with_values(plan_for_model_preset(preset), {**BF16, **values})
    return {r.id: r for r in estimate(plan).heaviest.rows}


def test_llama2_7b_under_4_39_holds_64_mib_of_caches() -> None:
    rows = _rows("llama-2-7b", {"runtime.transformers_version": "4.39.3"})
    row = rows[ID]
    assert row.low == row.high == 32 * 2 * 4096 * 128 * 2 == 67_108_864
    assert row.state == "buffers" and row.kind == "persistent" and row.allocated
    assert {"steady", "forward", "backward.start", "backward.layers", "optimizer"} <= row.moments
    assert rows["hbm.buffers.rotary"].low == 2 * 512  # inv_freq stays its own row


def test_the_caches_follow_the_model_not_the_batch() -> None:
    """max_position_embeddings, not seq_len: the same bytes at s 512 and s 4096."""
    short = _rows("llama-2-7b", {"runtime.transformers_version": "4.37.2", "batch.seq_len": 512})
    long = _rows("llama-2-7b", {"runtime.transformers_version": "4.37.2", "batch.seq_len": 4096})
    assert short[ID].low == long[ID].low == 67_108_864


def test_llama_4_41_and_later_keeps_none() -> None:
    assert ID not in _rows("llama-2-7b", {"runtime.transformers_version": "4.41.0"})
    assert ID not in _rows("llama-2-7b", {})  # the field's default (a current release)
    assert _rows("llama-2-7b", {"runtime.transformers_version": "4.40.0"})[ID].low == 67_108_864


def test_mistral_keeps_them_one_release_longer() -> None:
    """Mistral-7B's 32,768 positions: 16,777,216 B a layer at 4.41.0, none at 4.42.0."""
    rows = _rows("mistral-7b", {"runtime.transformers_version": "4.41.0"})
    assert rows[ID].low == 32 * 32_768 * 128 * 2 * 2 == 536_870_912
    assert ID not in _rows("mistral-7b", {"runtime.transformers_version": "4.42.0"})


def test_version_boundaries_and_unread_families() -> None:
    assert keeps_rope_caches("llama", "4.40.9") and not keeps_rope_caches("llama", "4.41")
    assert keeps_rope_caches("mistral", "4.41.2") and not keeps_rope_caches("mistral", "4.42.0")
    assert not keeps_rope_caches("qwen2", "4.39.3")  # not read: not modelled


def test_fp32_parameters_build_fp32_caches_and_rounding() -> None:
    """The default dtype is the parameters' dtype: fp32 (the plain stack's autocast
    policy, a model loaded without torch_dtype) doubles each tensor, 32 × 2 × 4096 × 128
    × 4 = 134,217,728 B; a tensor of 100 × 3 × 2 = 600 B rounds up to 1,024 B at the
    512 B block."""
    fp32 = {"runtime.transformers_version": "4.39.3", "method.precision.policy": "autocast"}
    assert _rows("llama-2-7b", fp32)[ID].low == 32 * 2 * 4096 * 128 * 4 == 134_217_728
    assert cache_bytes_per_layer(4096, 128, 4, 512) == 2 * 4096 * 128 * 4 == 4_194_304
    assert cache_bytes_per_layer(100, 3, 2, 512) == 2 * 1024


def test_the_caches_are_not_sharded_by_fsdp1() -> None:
    """Buffers stay whole on every rank: the same 64 MiB at DP 2 under FULL_SHARD."""
    rows = _rows(
        "llama-2-7b",
        {
            "runtime.transformers_version": "4.39.0",
            "parallelism.strategy": "fsdp1_full_shard",
            "parallelism.dp": 2,
        },
    )
    assert rows[ID].low == 67_108_864
