"""transformers config keywords for the families added after the first twelve.

Same contract as :mod:`engine.trace.hf_arch`: each spec field is written under the name
the family's ``configuration_<family>.py`` (transformers 5.24) reads, features the spec
does not model are switched off (sliding windows, dropout), and a spec the family
cannot express raises :class:`TraceRefused` naming the field.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.models.spec import ArchitectureSpec
from engine.trace.errors import TraceRefused

Builder = Callable[[ArchitectureSpec], dict[str, Any]]

_NO_SPECIAL_TOKENS: dict[str, None] = {
    "pad_token_id": None,
    "bos_token_id": None,
    "eos_token_id": None,
}


def _require(ok: bool, family: str, what: str) -> None:
    if not ok:
        raise TraceRefused(f"transformers' {family} cannot express this architecture: {what}")


def _common(a: ArchitectureSpec, head_dim: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {
        **_NO_SPECIAL_TOKENS,
        "hidden_size": a.hidden,
        "num_hidden_layers": a.layers,
        "num_attention_heads": a.heads,
        "num_key_value_heads": a.kv_heads,
        "intermediate_size": a.intermediate,
        "vocab_size": a.vocab,
        "max_position_embeddings": a.max_position,
        "tie_word_embeddings": a.tied_embeddings,
    }
    if head_dim:
        out["head_dim"] = a.dim_per_head
    else:
        _require(a.dim_per_head * a.heads == a.hidden, a.family, "head_dim is hidden / heads")
    return out


def _full(a: ArchitectureSpec) -> dict[str, Any]:
    return {"layer_types": ["full_attention"] * a.layers}


def _one_attention_bias(a: ArchitectureSpec) -> bool:
    _require(a.qkv_bias == a.o_bias, a.family, "one attention_bias covers q, k, v and o")
    return a.qkv_bias


def _olmo2(a: ArchitectureSpec) -> dict[str, Any]:
    _require(not a.mlp_bias, "olmo2", "no MLP bias")
    return {**_common(a), "attention_bias": _one_attention_bias(a)}


def _granite(a: ArchitectureSpec) -> dict[str, Any]:
    return {**_common(a), "attention_bias": _one_attention_bias(a), "mlp_bias": a.mlp_bias}


def _cohere(a: ArchitectureSpec) -> dict[str, Any]:
    return {
        **_common(a, head_dim=False),
        "attention_bias": _one_attention_bias(a),
        "use_qk_norm": a.qk_norm,
    }


def _cohere2(a: ArchitectureSpec) -> dict[str, Any]:
    _require(not a.qk_norm, "cohere2", "no q/k norm")
    return {
        **_common(a, head_dim=False),
        "attention_bias": _one_attention_bias(a),
        # the config insists on a window even when no layer slides: the longest one
        "sliding_window": a.max_position,
        **_full(a),
    }


def _starcoder2(a: ArchitectureSpec) -> dict[str, Any]:
    bias = _one_attention_bias(a)
    _require(a.mlp_bias == bias, "starcoder2", "one use_bias covers every linear but the head")
    return {**_common(a, head_dim=False), "use_bias": bias, "sliding_window": None}


def _stablelm(a: ArchitectureSpec) -> dict[str, Any]:
    _require(not a.o_bias and not a.mlp_bias, "stablelm", "o_proj and the MLP carry no bias")
    return {
        **_common(a, head_dim=False),
        "use_qkv_bias": a.qkv_bias,
        "qk_layernorm": a.qk_norm,
        "use_parallel_residual": a.residual == "parallel",
    }


def _falcon(a: ArchitectureSpec) -> dict[str, Any]:
    """Falcon's layout switches: the old architecture (one kv head or all of them, one
    or two sequential norms) or the new one (grouped kv heads, ``ln_attn`` + ``ln_mlp``
    or one shared norm)."""
    bias = _one_attention_bias(a)
    _require(a.mlp_bias == bias, "falcon", "one bias covers every linear but the head")
    out = _common(a, head_dim=False)
    out.pop("num_key_value_heads")
    out.pop("intermediate_size")
    out.update(bias=bias, alibi=False, ffn_hidden_size=a.intermediate)
    old_kv = a.kv_heads in (1, a.heads)
    if a.residual == "parallel_two_norms" or (a.residual == "parallel" and not old_kv):
        n_ln = 2 if a.residual == "parallel_two_norms" else 1
        out.update(
            new_decoder_architecture=True,
            parallel_attn=True,
            num_kv_heads=a.kv_heads,
            num_ln_in_parallel_attn=n_ln,
        )
        return out
    _require(old_kv, "falcon", "sequential layers have one kv head or one per head")
    out.update(
        new_decoder_architecture=False,
        multi_query=a.kv_heads == 1,
        parallel_attn=a.residual == "parallel",
    )
    return out


def _moe_fields(a: ArchitectureSpec) -> tuple[Any, dict[str, Any]]:
    assert a.moe is not None
    return a.moe, {"num_experts_per_tok": a.moe.top_k}


def _qwen2_moe(a: ArchitectureSpec) -> dict[str, Any]:
    moe, out = _moe_fields(a)
    _require(moe.first_dense_layers == 0, "qwen2_moe", "no leading dense layers")
    _require(
        moe.shared_experts == 1 and moe.shared_expert_gate,
        "qwen2_moe",
        "one gated shared expert",
    )
    _require(not a.o_bias and not a.mlp_bias, "qwen2_moe", "o_proj and the MLPs carry no bias")
    return {
        **_common(a),
        **out,
        "qkv_bias": a.qkv_bias,
        "num_experts": moe.num_experts,
        "moe_intermediate_size": moe.expert_intermediate,
        "shared_expert_intermediate_size": moe.shared_intermediate or moe.expert_intermediate,
        "decoder_sparse_step": moe.layer_step,
        "mlp_only_layers": [],
        "use_sliding_window": False,
        **_full(a),
    }


def _granitemoe(a: ArchitectureSpec) -> dict[str, Any]:
    moe, out = _moe_fields(a)
    _require(moe.first_dense_layers == 0 and moe.layer_step == 1, "granitemoe", "every layer MoE")
    out.update(
        _common(a),
        attention_bias=_one_attention_bias(a),
        num_local_experts=moe.num_experts,
        intermediate_size=moe.expert_intermediate,
    )
    if moe.shared_experts:
        _require(moe.shared_experts == 1, "granitemoeshared", "one shared MLP")
        out["shared_intermediate_size"] = moe.shared_intermediate or moe.expert_intermediate
    return out


def _phimoe(a: ArchitectureSpec) -> dict[str, Any]:
    moe, out = _moe_fields(a)
    _require(moe.first_dense_layers == 0 and moe.layer_step == 1, "phimoe", "every layer MoE")
    return {
        **_common(a),
        **out,
        "intermediate_size": moe.expert_intermediate,
        "num_local_experts": moe.num_experts,
        "attention_bias": _one_attention_bias(a),
        "lm_head_bias": a.lm_head_bias,
        "sliding_window": None,
    }


def _deepseek_v2(a: ArchitectureSpec) -> dict[str, Any]:
    moe, out = _moe_fields(a)
    assert a.mla is not None
    mla = a.mla
    common = _common(a)
    common.pop("head_dim")
    return {
        **common,
        **out,
        "intermediate_size": moe.dense_intermediate or a.intermediate,
        "attention_bias": _one_attention_bias(a),
        "n_routed_experts": moe.num_experts,
        "moe_intermediate_size": moe.expert_intermediate,
        "n_shared_experts": moe.shared_experts,
        "first_k_dense_replace": moe.first_dense_layers,
        "q_lora_rank": mla.q_lora_rank,
        "kv_lora_rank": mla.kv_lora_rank,
        "qk_nope_head_dim": mla.qk_nope_head_dim,
        "qk_rope_head_dim": mla.qk_rope_head_dim,
        "v_head_dim": mla.v_head_dim,
    }


MODEL_TYPES: dict[str, str] = {
    "olmo2": "olmo2",
    "granite": "granite",
    "cohere": "cohere",
    "cohere2": "cohere2",
    "starcoder2": "starcoder2",
    "stablelm": "stablelm",
    "falcon": "falcon",
    "qwen2_moe": "qwen2_moe",
    "granitemoe": "granitemoe",
    "phimoe": "phimoe",
    "deepseek_v2": "deepseek_v2",
}
"""MemPlan family → transformers ``model_type`` (GraniteMoE with a shared expert is
``granitemoeshared``: see :func:`model_type`)."""

BUILDERS: dict[str, Builder] = {
    "olmo2": _olmo2,
    "granite": _granite,
    "cohere": _cohere,
    "cohere2": _cohere2,
    "starcoder2": _starcoder2,
    "stablelm": _stablelm,
    "falcon": _falcon,
    "qwen2_moe": _qwen2_moe,
    "granitemoe": _granitemoe,
    "phimoe": _phimoe,
    "deepseek_v2": _deepseek_v2,
}


def model_type(arch: ArchitectureSpec) -> str:
    """The transformers ``model_type`` of one of these families."""
    if arch.family == "granitemoe" and arch.moe is not None and arch.moe.shared_experts:
        return "granitemoeshared"
    return MODEL_TYPES[arch.family]
