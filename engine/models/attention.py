"""Attention blocks: multi-/grouped-query attention and DeepSeek's multi-head latent attention.

Query width is ``heads × head_dim``, which differs from ``hidden`` whenever a config sets
``head_dim`` explicitly (Mistral-Nemo, Gemma 2/3, Qwen3); using ``hidden`` there would
miscount q and o.

The q/k norms differ by family in shape, not in meaning (transformers 5.24 modeling files):
one ``RMSNorm(head_dim)`` shared by the heads (Qwen3, Gemma 3); one norm over the whole
projection, ``RMSNorm(heads·head_dim)`` (OLMo-2); one weight per head stored as a
``(heads, head_dim)`` matrix (Cohere ``CohereLayerNorm``); a list of per-head
``LayerNorm(head_dim, bias=False)`` modules (StableLM ``StableLmLayerNormPerHead``); and a
weightless L2 norm (Llama-4 ``Llama4TextL2Norm``), which adds no parameter.
"""

from __future__ import annotations

from collections.abc import Iterator

from engine.models.spec import ArchitectureSpec, MLASpec
from engine.models.tensor import Tensor, linear, norm


def gqa_attention(
    spec: ArchitectureSpec,
    p: str,
    i: int | None,
    *,
    qkv_name: str = "qkv_proj",
    o_name: str = "o_proj",
    transposed: bool = False,
) -> Iterator[Tensor]:
    """q/k/v (or one fused qkv), the output projection, and optional per-head q/k norms."""
    h, d = spec.hidden, spec.dim_per_head
    q_out, kv_out = spec.heads * d, spec.kv_heads * d
    if spec.fused_qkv:
        yield from linear(
            f"{p}.{qkv_name}",
            q_out + 2 * kv_out,
            h,
            "qkv",
            spec.qkv_bias,
            i,
            transposed=transposed,
        )
    else:
        yield from linear(f"{p}.q_proj", q_out, h, "q", spec.qkv_bias, i)
        yield from linear(f"{p}.k_proj", kv_out, h, "k", spec.qkv_bias, i)
        yield from linear(f"{p}.v_proj", kv_out, h, "v", spec.qkv_bias, i)
    yield from linear(f"{p}.{o_name}", h, q_out, "o", spec.o_bias, i, transposed=transposed)
    if spec.qk_norm:
        yield from qk_norms(spec, p, i)


def qk_norms(spec: ArchitectureSpec, p: str, i: int | None) -> Iterator[Tensor]:
    """The q and k norms of one attention block, shaped as the family's modeling code."""
    d, a, k = spec.dim_per_head, spec.heads, spec.kv_heads
    if spec.family == "llama4":
        return  # L2 norm without weights
    if spec.family == "olmo2":
        yield from norm(f"{p}.q_norm", a * d, False, i, "qk_norm")
        yield from norm(f"{p}.k_norm", k * d, False, i, "qk_norm")
    elif spec.family == "cohere":
        yield Tensor(f"{p}.q_norm.weight", (a, d), "qk_norm", "weight", i)
        yield Tensor(f"{p}.k_norm.weight", (k, d), "qk_norm", "weight", i)
    elif spec.family == "stablelm":
        for n in range(a):
            yield from norm(f"{p}.q_layernorm.norms.{n}", d, False, i, "qk_norm")
        for n in range(k):
            yield from norm(f"{p}.k_layernorm.norms.{n}", d, False, i, "qk_norm")
    else:
        yield from norm(f"{p}.q_norm", d, False, i, "qk_norm")
        yield from norm(f"{p}.k_norm", d, False, i, "qk_norm")


def mla_attention(spec: ArchitectureSpec, mla: MLASpec, p: str, i: int | None) -> Iterator[Tensor]:
    """Multi-head latent attention as in DeepSeek-V2/V3 checkpoints.

    Queries: ``q_a`` down to ``q_lora_rank``, a norm, ``q_b`` up to heads × (nope + rope).
    Keys/values: ``kv_a`` to the latent plus one shared rotary key (``kv_lora_rank +
    rope``), a norm on the latent, ``kv_b`` up to heads × (nope + v). Output from
    heads × v back to hidden. ``attention_bias`` biases only q_a, kv_a and o; the full-rank
    q_proj, q_b and kv_b never carry one (``DeepseekV2Attention`` / ``DeepseekV3Attention``).
    """
    h, a = spec.hidden, spec.heads
    qk_head = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    bias = spec.qkv_bias
    if mla.q_lora_rank is None:
        yield from linear(f"{p}.q_proj", a * qk_head, h, "q", False, i)
    else:
        yield from linear(f"{p}.q_a_proj", mla.q_lora_rank, h, "q_a", bias, i)
        yield from norm(f"{p}.q_a_layernorm", mla.q_lora_rank, False, i, "latent_norm")
        yield from linear(f"{p}.q_b_proj", a * qk_head, mla.q_lora_rank, "q_b", False, i)
    yield from linear(
        f"{p}.kv_a_proj_with_mqa", mla.kv_lora_rank + mla.qk_rope_head_dim, h, "kv_a", bias, i
    )
    yield from norm(f"{p}.kv_a_layernorm", mla.kv_lora_rank, False, i, "latent_norm")
    yield from linear(
        f"{p}.kv_b_proj",
        a * (mla.qk_nope_head_dim + mla.v_head_dim),
        mla.kv_lora_rank,
        "kv_b",
        False,
        i,
    )
    yield from linear(f"{p}.o_proj", h, a * mla.v_head_dim, "o", spec.o_bias, i)


def attention(spec: ArchitectureSpec, p: str, i: int | None) -> Iterator[Tensor]:
    """The attention block of a HF-Llama-style layer (``self_attn``)."""
    if spec.mla is not None:
        yield from mla_attention(spec, spec.mla, p, i)
    else:
        yield from gqa_attention(spec, p, i)
