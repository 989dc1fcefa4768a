"""torchtune's one shared RoPE cache (``runtime.rope_cache = torchtune``,
engine/ledger/activations/tune_rope.py), hand-derived.

torchtune 1814feb ``torchtune/models/llama3_1/_component_builders.py`` ``llama3_1``
builds one ``Llama3ScaledRoPE(dim=head_dim, max_seq_len=max_seq_len)`` and passes it to
every layer; ``_position_embeddings.py`` ``rope_init`` registers ``theta`` (fp32
[head_dim // 2]) and ``build_rope_cache`` ``cache = stack([cos, sin], -1)`` (fp32
[max_seq_len, head_dim // 2, 2]). ``llama3_2_3b`` passes max_seq_len 131,072; head_dim
3072 / 24 = 128:

- cache 131,072 × 64 × 2 × 4 = 67,108,864 B (64 MiB);
- theta 64 × 4 = 256 B, rounded to the allocator's 512 B block = 512 B.

Llama-2-7B (``llama2_7b``: max_seq_len 4096, ``RotaryPositionalEmbeddings``, the same two
buffers): 4,096 × 64 × 2 × 4 = 2,097,152 B + 512 B.
"""

from __future__ import annotations

from engine.estimate import estimate
from engine.ledger.row import Row
from engine.plan import Plan, with_values
from engine.presets import plan_for_model_preset

TUNE = {"runtime.rope_cache": "torchtune", "batch.seq_len": 4096, "batch.micro_batch": 2}


def _rows(plan: Plan) -> dict[str, Row]:
    return {r.id: r for r in estimate(plan).heaviest.rows}


def test_llama3_2_3b_holds_one_64_mib_cache() -> None:
    rows = _rows(with_values(plan_for_model_preset("llama-3.2-3b"), TUNE))
    row = rows["hbm.buffers.rope_cache"]
    assert row.low == row.high == 131_072 * 64 * 2 * 4 + 512 == 67_109_376
    assert row.state == "buffers" and row.kind == "persistent"
    assert {"steady", "forward", "backward.start", "optimizer"} <= row.moments
    assert "hbm.buffers.rotary" not in rows  # no transformers inv_freq in torchtune's model


def test_llama2_7b_cache_follows_its_4096_positions() -> None:
    row = _rows(with_values(plan_for_model_preset("llama-2-7b"), TUNE))["hbm.buffers.rope_cache"]
    assert row.low == 4096 * 64 * 2 * 4 + 512 == 2_097_664


def test_the_cache_follows_the_model_not_the_batch() -> None:
    """The builder's max_seq_len, not the tokenizer's: the same bytes at s 1024, b 1."""
    base = plan_for_model_preset("llama-3.2-3b")
    short = with_values(base, {**TUNE, "batch.seq_len": 1024, "batch.micro_batch": 1})
    assert _rows(short)["hbm.buffers.rope_cache"].low == 67_109_376


def test_transformers_models_keep_their_inv_freq_only() -> None:
    """``auto`` on a non-torchtitan stack: transformers' ``inv_freq`` and
    ``original_inv_freq`` (2 × 64 × 4 B, each rounded to 512 B), no cache."""
    rows = _rows(with_values(plan_for_model_preset("llama-3.2-3b"), {"batch.seq_len": 4096}))
    assert "hbm.buffers.rope_cache" not in rows
    assert rows["hbm.buffers.rotary"].low == 2 * 512


def test_no_cos_sin_is_kept_once_per_forward() -> None:
    """torchtune's ``MultiHeadAttention`` calls its RoPE module inside each (checkpointed)
    layer, which reads ``self.cache`` there: nothing like transformers' cos / sin
    (2 × 4096 × 128 × 2 B = 2,097,152 B, made once in ``LlamaModel.forward``) is kept for
    every layer. What is left of ``hbm.activations.saved.other`` under full AC is the
    positions the checkpoint keeps, 4096 × 8 B = 32,768 B."""
    base = with_values(plan_for_model_preset("llama-3.2-3b"), {"method.recompute.policy": "full"})
    hf = _rows(with_values(base, {**TUNE, "runtime.rope_cache": "auto"}))
    tune = _rows(with_values(base, TUNE))
    assert hf["hbm.activations.saved.other"].low == 2 * 4096 * 128 * 2 + 32_768
    assert tune["hbm.activations.saved.other"].low == 32_768
