"""config.json → spec fields for the mixture-of-experts and MLA families.

Defaults are transformers 5.24's (``configuration_<family>.py``); which layers hold
experts follows each decoder layer's constructor: Qwen-MoE ``(i + 1) %
decoder_sparse_step == 0`` and not in ``mlp_only_layers``; Llama-4 ``i in moe_layers``
(by default every ``interleave_moe_layer_step``-th layer); DeepSeek ``i >=
first_k_dense_replace`` (transformers ignores ``moe_layer_freq``).
"""

from __future__ import annotations

from typing import Any

from engine.models.hf_dense import Fields, common, llama_like, qwen2
from engine.models.hf_reader import ConfigImportError, Reader
from engine.models.spec import MLASpec, MoESpec

MIXTRAL_DEFAULTS: dict[str, Any] = {
    "vocab_size": 32000,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": None,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": False,
    "num_experts_per_tok": 2,
    "num_local_experts": 8,
}
PHIMOE_DEFAULTS = {
    **MIXTRAL_DEFAULTS,
    "vocab_size": 32064,
    "intermediate_size": 6400,
    "num_local_experts": 16,
    "attention_bias": False,
    "lm_head_bias": False,
}
QWEN3_MOE_DEFAULTS: dict[str, Any] = {
    "vocab_size": 151936,
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "num_hidden_layers": 24,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "head_dim": None,
    "max_position_embeddings": 32768,
    "tie_word_embeddings": False,
    "attention_bias": False,
    "mlp_bias": False,
    "decoder_sparse_step": 1,
    "moe_intermediate_size": 768,
    "num_experts_per_tok": 8,
    "num_experts": 128,
    "mlp_only_layers": [],
}
QWEN2_MOE_DEFAULTS = {
    **QWEN3_MOE_DEFAULTS,
    "intermediate_size": 5632,
    "num_attention_heads": 16,
    "num_key_value_heads": 16,
    "moe_intermediate_size": 1408,
    "shared_expert_intermediate_size": 5632,
    "num_experts_per_tok": 4,
    "num_experts": 60,
    "qkv_bias": True,
}
GRANITEMOE_DEFAULTS: dict[str, Any] = {
    "vocab_size": 32000,
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": None,
    "head_dim": None,
    "max_position_embeddings": 2048,
    "tie_word_embeddings": False,
    "attention_bias": False,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "shared_intermediate_size": 0,
}
LLAMA4_TEXT_DEFAULTS: dict[str, Any] = {
    "vocab_size": 202048,
    "hidden_size": 5120,
    "intermediate_size": 8192,
    "intermediate_size_mlp": 16384,
    "num_hidden_layers": 48,
    "num_attention_heads": 40,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": False,
    "attention_bias": False,
    "num_experts_per_tok": 1,
    "num_local_experts": 16,
    "moe_layers": None,
    "interleave_moe_layer_step": 1,
    "use_qk_norm": True,
}
DEEPSEEK_V2_DEFAULTS: dict[str, Any] = {
    "vocab_size": 102400,
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": None,
    "max_position_embeddings": 2048,
    "tie_word_embeddings": False,
    "attention_bias": False,
    "mlp_bias": False,
    "first_k_dense_replace": 0,
    "kv_lora_rank": 512,
    "q_lora_rank": 1536,
    "n_routed_experts": 64,
    "n_shared_experts": 2,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "num_experts_per_tok": None,
    "moe_intermediate_size": 1407,
    "moe_layer_freq": 1,
}
DEEPSEEK_V3_DEFAULTS = {
    **DEEPSEEK_V2_DEFAULTS,
    "vocab_size": 129280,
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "moe_intermediate_size": 2048,
    "num_hidden_layers": 61,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "n_shared_experts": 1,
    "n_routed_experts": 256,
    "num_experts_per_tok": 8,
    "first_k_dense_replace": 3,
    "max_position_embeddings": 4096,
    "num_nextn_predict_layers": 1,
}


def mixtral(r: Reader) -> Fields:
    out = common(r, "mixtral")
    out["moe"] = MoESpec(
        num_experts=r.first_int("num_local_experts", "num_experts"),
        top_k=r.get_int("num_experts_per_tok"),
        expert_intermediate=out["intermediate"],
    )
    return out


def phimoe(r: Reader) -> Fields:
    """Phi-3.5-MoE: LayerNorm with bias, ``attention_bias`` on q/k/v/o, ``lm_head_bias``."""
    out = mixtral(r)
    bias = r.get_bool("attention_bias")
    out.update(
        family="phimoe",
        norm="layernorm",
        norm_bias=True,
        qkv_bias=bias,
        o_bias=bias,
        lm_head_bias=r.get_bool("lm_head_bias"),
    )
    return out


def _sparse_step(r: Reader) -> int:
    r.require(
        "mlp_only_layers",
        lambda v: not v,
        "a list of dense layers is not modelled (only every decoder_sparse_step-th layer)",
    )
    return r.get_int("decoder_sparse_step")


def qwen3_moe(r: Reader) -> Fields:
    out = llama_like(r, "qwen3")
    out["family"] = "qwen3_moe"
    out["moe"] = MoESpec(
        num_experts=r.first_int("num_experts", "num_local_experts"),
        top_k=r.get_int("num_experts_per_tok"),
        expert_intermediate=r.get_int("moe_intermediate_size"),
        layer_step=_sparse_step(r),
    )
    return out


def qwen2_moe(r: Reader) -> Fields:
    """Qwen1.5/Qwen2-MoE: ``qkv_bias``, one gated shared expert beside the routed ones."""
    out = qwen2(r)
    out.update(family="qwen2_moe", qkv_bias=r.get_bool("qkv_bias"))
    shared = r.get_int("shared_expert_intermediate_size")
    out["moe"] = MoESpec(
        num_experts=r.get_int("num_experts"),
        top_k=r.get_int("num_experts_per_tok"),
        expert_intermediate=r.get_int("moe_intermediate_size"),
        shared_experts=1 if shared else 0,
        shared_intermediate=shared or None,
        shared_expert_gate=True,
        layer_step=_sparse_step(r),
    )
    return out


def granitemoe(r: Reader) -> Fields:
    """Granite-MoE (and -Shared): experts of ``intermediate_size``; ``shared_mlp`` if > 0."""
    out = llama_like(r, "granitemoe")
    out.update(qk_norm=False, mlp_bias=False)
    shared = r.get_int("shared_intermediate_size")
    out["moe"] = MoESpec(
        num_experts=r.get_int("num_local_experts"),
        top_k=r.get_int("num_experts_per_tok"),
        expert_intermediate=out["intermediate"],
        shared_experts=1 if shared else 0,
        shared_intermediate=shared or None,
    )
    return out


def llama4_text(r: Reader) -> Fields:
    """Llama-4's language model: routed experts + one shared expert, dense layers of
    ``intermediate_size_mlp``, a weightless L2 q/k norm."""
    out = common(r, "llama4")
    bias = r.get_bool("attention_bias")
    out.update(qkv_bias=bias, o_bias=bias, qk_norm=r.get_bool("use_qk_norm"))
    step = r.get_int("interleave_moe_layer_step")
    r.require("interleave_moe_layer_step", lambda v: v >= 1, "it must be 1 or more")
    layers = out["layers"]
    # a lazy range: a hostile num_hidden_layers must not build a huge list (the spec
    # refuses over 10,000 layers afterwards)
    pattern = range(step - 1, layers, step)
    r.require(
        "moe_layers",
        lambda v: v is None or (isinstance(v, list) and v == list(pattern[: len(v) + 1])),
        f"only every interleave_moe_layer_step-th layer ({step}) can hold experts",
    )
    inter = out["intermediate"]
    out["moe"] = MoESpec(
        num_experts=r.get_int("num_local_experts"),
        top_k=r.get_int("num_experts_per_tok"),
        expert_intermediate=inter,
        shared_experts=1,
        shared_intermediate=inter,
        dense_intermediate=r.get_int("intermediate_size_mlp"),
        layer_step=step,
    )
    return out


def _deepseek(r: Reader, version: str) -> Fields:
    out = common(r, "deepseek_v3" if version == "v3" else "deepseek_v2", "derived")
    bias = r.get_bool("attention_bias")
    out.update(qkv_bias=bias, o_bias=bias, head_dim=None)
    r.require(
        "moe_layer_freq",
        lambda v: v in (None, 1),
        "every layer after the dense ones must be MoE",
    )
    if version == "v2" and r.get_bool("mlp_bias"):
        raise ConfigImportError(
            "config.json key 'mlp_bias' = true is not supported for deepseek_v2: its dense "
            "and shared MLPs would carry biases that its fused experts do not"
        )
    moe_inter = r.get_int("moe_intermediate_size")
    out["moe"] = MoESpec(
        num_experts=r.get_int("n_routed_experts"),
        top_k=r.get_int("num_experts_per_tok"),
        expert_intermediate=moe_inter,
        shared_experts=r.get_int("n_shared_experts"),
        shared_intermediate=moe_inter,
        first_dense_layers=r.get_int("first_k_dense_replace"),
        router_bias=version == "v3",
    )
    out["mla"] = MLASpec(
        q_lora_rank=r.opt_int("q_lora_rank"),
        kv_lora_rank=r.get_int("kv_lora_rank"),
        qk_nope_head_dim=r.get_int("qk_nope_head_dim"),
        qk_rope_head_dim=r.get_int("qk_rope_head_dim"),
        v_head_dim=r.get_int("v_head_dim"),
    )
    return out


def deepseek_v2(r: Reader) -> Fields:
    """DeepSeek-V2 / V2-Lite (``q_lora_rank`` null: a full-rank ``q_proj``)."""
    return _deepseek(r, "v2")


def deepseek_v3(r: Reader, mtp: bool) -> Fields:
    """DeepSeek-V3: V2's layout plus the router's score-correction bias, and the MTP
    modules only when asked for (``mtp``), as transformers does not build them."""
    out = _deepseek(r, "v3")
    out["mtp_layers"] = r.get_int("num_nextn_predict_layers") if mtp else 0
    return out
