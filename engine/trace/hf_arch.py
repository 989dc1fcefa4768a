"""The plan's architecture as a transformers config: ``model_type`` and keyword arguments.

The inverse of ``engine/models/hf_config.py`` (config.json → spec): each family's spec
fields are written under the names its transformers config class reads. Features the
spec does not model are switched off so the traced model is the one the ledger counts:
sliding windows (every layer full attention), GPT-2's dropout, and DeepSeek-V3's
multi-token-prediction modules. A spec a family's config cannot express (e.g. a Llama
with a bias on q, k, v but not o) raises :class:`TraceRefused` naming the field. The
later families are in :mod:`engine.trace.hf_arch_families`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.models.spec import ArchitectureSpec
from engine.trace import hf_arch_families
from engine.trace.errors import TraceRefused

MODEL_TYPES: dict[str, str] = {
    "llama": "llama",
    "mistral": "mistral",
    "qwen2": "qwen2",
    "qwen3": "qwen3",
    "gemma2": "gemma2",
    "gemma3": "gemma3_text",
    "phi3": "phi3",
    "gpt2": "gpt2",
    "gpt_neox": "gpt_neox",
    "mixtral": "mixtral",
    "qwen3_moe": "qwen3_moe",
    "deepseek_v3": "deepseek_v3",
}
"""MemPlan family → transformers ``model_type``."""


def _require(ok: bool, family: str, what: str) -> None:
    if not ok:
        raise TraceRefused(f"transformers' {family} cannot express this architecture: {what}")


NO_SPECIAL_TOKENS: dict[str, None] = {
    "pad_token_id": None,
    "bos_token_id": None,
    "eos_token_id": None,
}
"""Special-token ids do not change memory; the configs' defaults (e.g. Phi-3's pad id
32000) can fall outside a small plan's vocabulary and fail the embedding's check."""


def _common(a: ArchitectureSpec) -> dict[str, Any]:
    return {
        **NO_SPECIAL_TOKENS,
        "hidden_size": a.hidden,
        "num_hidden_layers": a.layers,
        "num_attention_heads": a.heads,
        "num_key_value_heads": a.kv_heads,
        "head_dim": a.dim_per_head,
        "intermediate_size": a.intermediate,
        "vocab_size": a.vocab,
        "max_position_embeddings": a.max_position,
        "tie_word_embeddings": a.tied_embeddings,
    }


def _full_attention(a: ArchitectureSpec) -> dict[str, Any]:
    return {"sliding_window": None, "layer_types": ["full_attention"] * a.layers}


def _llama(a: ArchitectureSpec) -> dict[str, Any]:
    _require(a.qkv_bias == a.o_bias, "llama", "one attention_bias covers q, k, v and o")
    _require(not a.qk_norm and not a.sandwich_norm, "llama", "no q/k norm or sandwich norms")
    return {**_common(a), "attention_bias": a.qkv_bias, "mlp_bias": a.mlp_bias}


def _mistral(a: ArchitectureSpec) -> dict[str, Any]:
    _require(not (a.qkv_bias or a.o_bias or a.mlp_bias), "mistral", "no projection biases")
    return {**_common(a), "sliding_window": None}


def _qwen2(a: ArchitectureSpec) -> dict[str, Any]:
    _require(a.qkv_bias and not a.o_bias, "qwen2", "q, k, v always biased and o never")
    return {**_common(a), "use_sliding_window": False, **_full_attention(a)}


def _qwen3(a: ArchitectureSpec) -> dict[str, Any]:
    _require(a.qkv_bias == a.o_bias, "qwen3", "one attention_bias covers q, k, v and o")
    return {
        **_common(a),
        "attention_bias": a.qkv_bias,
        "use_sliding_window": False,
        **_full_attention(a),
    }


def _gemma(a: ArchitectureSpec) -> dict[str, Any]:
    _require(a.qkv_bias == a.o_bias, "gemma", "one attention_bias covers q, k, v and o")
    # Gemma's config insists on a window even when no layer slides: the longest one.
    window = {"sliding_window": a.max_position, "layer_types": ["full_attention"] * a.layers}
    return {**_common(a), "attention_bias": a.qkv_bias, **window}


def _phi3(a: ArchitectureSpec) -> dict[str, Any]:
    return {**_common(a), "sliding_window": None}


NO_DROPOUT: dict[str, float] = {"resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}
"""GPT-2's config trains with dropout 0.1; the spec (like its importer) models none, so
the trace runs without it (a CPU dropout keeps a mask of the input's dtype and sends
SDPA to its fp32 math path, neither of which a GPU run does)."""


def _gpt2(a: ArchitectureSpec) -> dict[str, Any]:
    return {
        **NO_SPECIAL_TOKENS,
        **NO_DROPOUT,
        "n_embd": a.hidden,
        "n_layer": a.layers,
        "n_head": a.heads,
        "n_inner": a.intermediate,
        "vocab_size": a.vocab,
        "n_positions": a.max_position,
        "tie_word_embeddings": a.tied_embeddings,
    }


def _gpt_neox(a: ArchitectureSpec) -> dict[str, Any]:
    _require(a.qkv_bias == a.o_bias, "gpt_neox", "one attention_bias covers qkv and dense")
    out = _common(a)
    out.pop("head_dim")
    return {**out, "attention_bias": a.qkv_bias}


def _mixtral(a: ArchitectureSpec) -> dict[str, Any]:
    assert a.moe is not None
    return {
        **_common(a),
        "intermediate_size": a.moe.expert_intermediate,
        "num_local_experts": a.moe.num_experts,
        "num_experts_per_tok": a.moe.top_k,
        "sliding_window": None,
    }


def _qwen3_moe(a: ArchitectureSpec) -> dict[str, Any]:
    assert a.moe is not None
    _require(a.moe.first_dense_layers == 0, "qwen3_moe", "every layer is MoE")
    return {
        **_qwen3(a),
        "num_experts": a.moe.num_experts,
        "num_experts_per_tok": a.moe.top_k,
        "moe_intermediate_size": a.moe.expert_intermediate,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
    }


def _deepseek_v3(a: ArchitectureSpec) -> dict[str, Any]:
    assert a.moe is not None and a.mla is not None
    moe, mla = a.moe, a.mla
    groups = 1
    out = _common(a)
    out.pop("head_dim")
    return {
        **out,
        "intermediate_size": moe.dense_intermediate or a.intermediate,
        "attention_bias": a.qkv_bias,
        "n_routed_experts": moe.num_experts,
        "num_experts_per_tok": moe.top_k,
        "moe_intermediate_size": moe.expert_intermediate,
        "n_shared_experts": moe.shared_experts,
        "first_k_dense_replace": moe.first_dense_layers,
        "n_group": groups,
        "topk_group": groups,
        "q_lora_rank": mla.q_lora_rank,
        "kv_lora_rank": mla.kv_lora_rank,
        "qk_nope_head_dim": mla.qk_nope_head_dim,
        "qk_rope_head_dim": mla.qk_rope_head_dim,
        "v_head_dim": mla.v_head_dim,
        "num_nextn_predict_layers": 0,
    }


_BUILDERS: dict[str, Callable[[ArchitectureSpec], dict[str, Any]]] = {
    "llama": _llama,
    "mistral": _mistral,
    "qwen2": _qwen2,
    "qwen3": _qwen3,
    "gemma2": _gemma,
    "gemma3": _gemma,
    "phi3": _phi3,
    "gpt2": _gpt2,
    "gpt_neox": _gpt_neox,
    "mixtral": _mixtral,
    "qwen3_moe": _qwen3_moe,
    "deepseek_v3": _deepseek_v3,
}


def hf_config_kwargs(arch: ArchitectureSpec) -> tuple[str, dict[str, Any]]:
    """``(model_type, kwargs)`` for ``AutoConfig.for_model`` of this architecture."""
    if arch.family in hf_arch_families.BUILDERS:
        kwargs = hf_arch_families.BUILDERS[arch.family](arch)
        return hf_arch_families.model_type(arch), kwargs
    builder = _BUILDERS.get(arch.family)
    if builder is None:
        raise TraceRefused(f"transformers has no model for the {arch.family} family")
    return MODEL_TYPES[arch.family], builder(arch)
