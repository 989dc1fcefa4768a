"""config.json → spec fields for the dense families, each with transformers' defaults.

Every ``*_DEFAULTS`` table is the default of the keys we read in that family's
``configuration_<family>.py`` (transformers 5.24); a test checks each one against the
installed transformers when it is present. Biases, norm kinds and norm placement follow
the family's ``modeling_<family>.py``: e.g. Mistral and Phi-3 never bias a projection,
Qwen2 always biases q/k/v and never o, StarCoder2's ``use_bias`` covers every linear
but the head, Cohere's LayerNorm has no bias.
"""

from __future__ import annotations

from typing import Any, Literal

from engine.models.hf_reader import ConfigImportError, Reader, stored_dtype
from engine.models.spec import Family

Fields = dict[str, Any]
HeadDimRule = Literal["config", "derived"]
"""``config``: the attention reads ``config.head_dim`` when set (``getattr(config,
"head_dim", hidden // heads)``); ``derived``: it always uses hidden / heads."""


def _llama_keys(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "vocab_size": 32000,
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": None,  # None → num_attention_heads
        "head_dim": None,
        "max_position_embeddings": 2048,
        "tie_word_embeddings": False,
        "attention_bias": False,
        "mlp_bias": False,
    }
    base.update(overrides)
    return base


LLAMA_DEFAULTS = _llama_keys()
MISTRAL_DEFAULTS = _llama_keys(
    intermediate_size=14336, num_key_value_heads=8, max_position_embeddings=131072
)
QWEN2_DEFAULTS = _llama_keys(
    vocab_size=151936,
    intermediate_size=22016,
    num_key_value_heads=32,
    max_position_embeddings=32768,
)
QWEN3_DEFAULTS = {**QWEN2_DEFAULTS, "head_dim": 128}
QWEN25_VL_TEXT_DEFAULTS = _llama_keys(
    vocab_size=152064,
    hidden_size=8192,
    intermediate_size=29568,
    num_hidden_layers=80,
    num_attention_heads=64,
    num_key_value_heads=8,
    max_position_embeddings=32768,
)
GEMMA2_DEFAULTS = _llama_keys(
    vocab_size=256000,
    hidden_size=2304,
    intermediate_size=9216,
    num_hidden_layers=26,
    num_attention_heads=8,
    num_key_value_heads=4,
    head_dim=256,
    max_position_embeddings=8192,
    tie_word_embeddings=True,
)
GEMMA3_TEXT_DEFAULTS = {**GEMMA2_DEFAULTS, "vocab_size": 262208, "max_position_embeddings": 131072}
PHI3_DEFAULTS = _llama_keys(
    vocab_size=32064, hidden_size=3072, intermediate_size=8192, max_position_embeddings=4096
)
OLMO2_DEFAULTS = _llama_keys(vocab_size=50304)
GRANITE_DEFAULTS = _llama_keys()
COHERE_DEFAULTS = _llama_keys(
    vocab_size=256000,
    hidden_size=8192,
    intermediate_size=22528,
    num_hidden_layers=40,
    num_attention_heads=64,
    max_position_embeddings=8192,
    tie_word_embeddings=True,
    use_qk_norm=False,
)
COHERE2_DEFAULTS = {k: v for k, v in COHERE_DEFAULTS.items() if k != "use_qk_norm"}
STARCODER2_DEFAULTS = _llama_keys(
    vocab_size=49152,
    hidden_size=3072,
    intermediate_size=12288,
    num_hidden_layers=30,
    num_attention_heads=24,
    num_key_value_heads=2,
    max_position_embeddings=4096,
    tie_word_embeddings=True,
    use_bias=True,
)
STABLELM_DEFAULTS = _llama_keys(
    vocab_size=50304,
    hidden_size=2560,
    intermediate_size=6912,
    num_key_value_heads=32,
    max_position_embeddings=4096,
    use_qkv_bias=False,
    qk_layernorm=False,
    use_parallel_residual=False,
)
GPT_NEOX_DEFAULTS = {
    "vocab_size": 50432,
    "hidden_size": 6144,
    "num_hidden_layers": 44,
    "num_attention_heads": 64,
    "intermediate_size": 24576,
    "max_position_embeddings": 2048,
    "tie_word_embeddings": False,
    "use_parallel_residual": True,
    "attention_bias": True,
}
GPT2_DEFAULTS = {
    "vocab_size": 50257,
    "n_positions": 1024,
    "n_embd": 768,
    "n_layer": 12,
    "n_head": 12,
    "n_inner": None,  # None → 4 · n_embd
    "tie_word_embeddings": True,
}


def _head_dim(r: Reader, rule: HeadDimRule) -> int | None:
    """The spec's head_dim as the file (or the family default) gives it; None = hidden /
    heads, which is also what a ``derived`` family always uses."""
    return r.opt_int("head_dim") if rule == "config" else None


def common(r: Reader, family: Family, rule: HeadDimRule = "config") -> Fields:
    """The keys every Llama-style family shares, with the family's defaults."""
    heads = r.get_int("num_attention_heads")
    hidden = r.get_int("hidden_size")
    kv = r.opt_int("num_key_value_heads")
    return {
        "family": family,
        "hidden": hidden,
        "layers": r.get_int("num_hidden_layers"),
        "heads": heads,
        "kv_heads": heads if kv is None else kv,
        "head_dim": _head_dim(r, rule),
        "intermediate": r.get_int("intermediate_size"),
        "vocab": r.get_int("vocab_size"),
        "max_position": r.get_int("max_position_embeddings"),
        "tied_embeddings": r.get_bool("tie_word_embeddings"),
        "stored_dtype": stored_dtype(r.cfg),
    }


def llama_like(r: Reader, family: Family) -> Fields:
    """Llama, Granite, OLMo-2, Qwen3: ``attention_bias`` on q/k/v/o, ``mlp_bias``."""
    out = common(r, family)
    bias = r.get_bool("attention_bias")
    out.update(qkv_bias=bias, o_bias=bias, mlp_bias=r.get_bool("mlp_bias"))
    out["qk_norm"] = family in ("qwen3", "olmo2")
    return out


def unbiased(r: Reader, family: Family) -> Fields:
    """Mistral, Phi-3: no projection bias in any configuration."""
    out = common(r, family)
    if family == "phi3":
        out.update(fused_qkv=True, fused_gate_up=True)
    return out


def qwen2(r: Reader, rule: HeadDimRule = "config") -> Fields:
    """Qwen2 (and Qwen2.5-VL's language model): q/k/v always biased, o never."""
    out = common(r, "qwen2", rule)
    out.update(qkv_bias=True, o_bias=False)
    return out


def gemma(r: Reader, family: Family) -> Fields:
    out = common(r, family)
    bias = r.get_bool("attention_bias")
    out.update(
        mlp="geglu",
        sandwich_norm=True,
        qkv_bias=bias,
        o_bias=bias,
        qk_norm=family == "gemma3",
    )
    return out


def cohere(r: Reader, family: Family) -> Fields:
    """Cohere / Cohere2: LayerNorm without bias, one norm shared by parallel attn + MLP."""
    out = common(r, family)
    bias = r.get_bool("attention_bias")
    out.update(
        norm="layernorm",
        residual="parallel",
        qkv_bias=bias,
        o_bias=bias,
        qk_norm=family == "cohere" and r.get_bool("use_qk_norm"),
    )
    return out


def starcoder2(r: Reader) -> Fields:
    out = common(r, "starcoder2")
    bias = r.get_bool("use_bias")
    out.update(
        mlp="gelu", norm="layernorm", norm_bias=True, qkv_bias=bias, o_bias=bias, mlp_bias=bias
    )
    return out


def stablelm(r: Reader) -> Fields:
    out = common(r, "stablelm", "derived")
    out.update(
        norm="layernorm",
        norm_bias=True,
        qkv_bias=r.get_bool("use_qkv_bias"),
        qk_norm=r.get_bool("qk_layernorm"),
        residual="parallel" if r.get_bool("use_parallel_residual") else "sequential",
    )
    return out


def gpt2(r: Reader) -> Fields:
    hidden = r.first_int("n_embd", "hidden_size")
    inner = r.opt_int("n_inner")
    heads = r.first_int("n_head", "num_attention_heads")
    return {
        "family": "gpt2",
        "hidden": hidden,
        "layers": r.first_int("n_layer", "num_hidden_layers"),
        "heads": heads,
        "kv_heads": heads,
        "intermediate": 4 * hidden if inner is None else inner,
        "vocab": r.get_int("vocab_size"),
        "max_position": r.first_int("n_positions", "max_position_embeddings"),
        "tied_embeddings": r.get_bool("tie_word_embeddings"),
        "mlp": "gelu",
        "norm": "layernorm",
        "norm_bias": True,
        "qkv_bias": True,
        "o_bias": True,
        "mlp_bias": True,
        "fused_qkv": True,
        "position": "learned",
        "stored_dtype": stored_dtype(r.cfg),
    }


def gpt_neox(r: Reader) -> Fields:
    out = common(r, "gpt_neox", "derived")
    out["kv_heads"] = out["heads"]
    bias = r.get_bool("attention_bias")
    out.update(
        mlp="gelu",
        norm="layernorm",
        norm_bias=True,
        qkv_bias=bias,
        o_bias=bias,
        mlp_bias=True,
        fused_qkv=True,
        residual="parallel_two_norms" if r.get_bool("use_parallel_residual") else "sequential",
    )
    return out


def require_no_alibi(r: Reader) -> None:
    """ALiBi changes attention, not parameters, but MemPlan does not model its bias tensor."""
    if r.get_bool("alibi"):
        raise ConfigImportError(
            "config.json key 'alibi' = true is not supported: ALiBi attention biases are not "
            "modelled (Falcon-7B/40B/180B and Falcon-11B use rotary positions)"
        )


FALCON_DEFAULTS = {
    "vocab_size": 65024,
    "hidden_size": 4544,
    "num_hidden_layers": 32,
    "num_attention_heads": 71,
    "num_kv_heads": None,  # None → num_attention_heads
    "alibi": False,
    "new_decoder_architecture": False,
    "multi_query": True,
    "parallel_attn": True,
    "bias": False,
    "max_position_embeddings": 2048,
    "ffn_hidden_size": None,  # None → 4 · hidden_size
    "tie_word_embeddings": True,
    "num_ln_in_parallel_attn": None,  # None → 2 with the new decoder architecture
}


def falcon(r: Reader) -> Fields:
    """Falcon as ``FalconAttention`` / ``FalconDecoderLayer`` build it.

    kv heads: ``num_kv_heads`` with the new decoder architecture, one when
    ``multi_query``, else every head. Norms: two sequential ones without
    ``parallel_attn``; with it, ``ln_attn`` + ``ln_mlp`` when ``num_ln_in_parallel_attn``
    is 2 (the new architecture's default), else one shared ``input_layernorm``.
    """
    require_no_alibi(r)
    legacy = r.cfg.get("n_embed")  # FalconConfig still accepts the old key
    hidden = r.get_int("hidden_size") if legacy is None else Reader.check_int("n_embed", legacy)
    heads = r.get_int("num_attention_heads")
    new_arch = r.get_bool("new_decoder_architecture")
    if new_arch:
        kv = r.opt_int("num_kv_heads") or heads
    else:
        kv = 1 if r.get_bool("multi_query") else heads
    n_ln = r.opt_int("num_ln_in_parallel_attn")
    if n_ln is None and new_arch:
        n_ln = 2
    if not r.get_bool("parallel_attn"):
        residual = "sequential"
    else:
        residual = "parallel_two_norms" if n_ln == 2 else "parallel"
    ffn = r.opt_int("ffn_hidden_size")
    bias = r.get_bool("bias")
    return {
        "family": "falcon",
        "hidden": hidden,
        "layers": r.get_int("num_hidden_layers"),
        "heads": heads,
        "kv_heads": kv,
        "intermediate": 4 * hidden if ffn is None else ffn,
        "vocab": r.get_int("vocab_size"),
        "max_position": r.get_int("max_position_embeddings"),
        "tied_embeddings": r.get_bool("tie_word_embeddings"),
        "mlp": "gelu",
        "norm": "layernorm",
        "norm_bias": True,
        "qkv_bias": bias,
        "o_bias": bias,
        "mlp_bias": bias,
        "fused_qkv": True,
        "residual": residual,
        "stored_dtype": stored_dtype(r.cfg),
    }
