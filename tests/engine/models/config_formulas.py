"""Hand formulas for the parameter count of a ``config.json``, one per family.

Symbols: V vocab, h hidden, L layers, a heads, k kv heads, d head dim, I intermediate.
A decoder layer = attention + feed-forward + norms:

- attention: q ``h·a·d`` + k, v ``2·h·k·d`` + o ``a·d·h``; biases ``a·d + 2·k·d`` (q/k/v)
  and ``h`` (o) where the family has them; q/k norms ``d + d`` (per-head, shared: Qwen3,
  Gemma-3), ``a·d + k·d`` (whole width: OLMo-2; per-head weights: Cohere, StableLM),
  0 (Llama-4's L2 norm);
- MLA (DeepSeek): q ``h·r_q + r_q + r_q·a·(n + r)`` (or ``h·a·(n + r)`` without
  ``q_lora_rank``) + kv_a ``h·(r_kv + r) + r_kv`` + kv_b ``r_kv·a·(n + v)`` + o ``a·v·h``;
- dense MLP ``3·h·I`` (gated) or ``2·h·I`` (+ ``I + h`` biases) when plain;
- MoE: router ``E·h``, E experts of ``3·h·I_e``, shared experts ``3·h·I_s``, Qwen2-MoE's
  shared-expert gate ``h``, DeepSeek-V3's correction bias ``E``;
- norms: ``n·h`` (``2·n·h`` with LayerNorm biases), n = 2 (pre), 4 (sandwich), 2 (OLMo-2
  post), 1 (one norm shared by the parallel branches);

plus the embedding ``V·h``, the final norm, and an untied head ``V·h`` (+ ``V`` bias).
Family facts (which biases, norms, tying) come from transformers 5.24's
``modeling_<family>.py``; absent keys take its ``configuration_<family>.py`` default.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

Cfg = dict[str, Any]

CONFIGS = Path(__file__).resolve().parents[2] / "data" / "configs"
NAMES = sorted(p.stem for p in CONFIGS.glob("*.json"))
"""One published config.json per preset, named as the preset."""


def config(name: str) -> Cfg:
    """The published config of preset ``name``."""
    doc: Cfg = json.loads((CONFIGS / f"{name}.json").read_text(encoding="utf-8"))
    return doc


_WRAPPED = {"gemma3": "gemma3_text", "mistral3": "mistral", "llama4": "llama4_text"}


def text_model(cfg: Cfg) -> tuple[str, Cfg]:
    """(model_type, config) of the language model a file describes (wrappers unwrapped)."""
    mt = cfg["model_type"]
    if mt == "qwen2_5_vl":
        return "qwen2_5_vl_text", {**cfg, "tie_word_embeddings": cfg.get("tie_word_embeddings")}
    if mt in _WRAPPED:
        text = dict(cfg["text_config"])
        tie = text.get("tie_word_embeddings") if mt == "llama4" else cfg.get("tie_word_embeddings")
        text["tie_word_embeddings"] = (mt != "llama4") if tie is None else tie
        if mt == "gemma3":
            text.setdefault("vocab_size", 262208)  # Gemma3TextConfig's default
        return _WRAPPED[mt], text
    return mt, cfg


def _attention(c: Cfg, mt: str, d: int) -> int:
    h, a = c["hidden_size"], c["num_attention_heads"]
    k = c.get("num_key_value_heads") or a
    n = 2 * h * a * d + 2 * h * k * d
    bias_keys = {"starcoder2": "use_bias", "stablelm": "use_qkv_bias"}
    qkv_bias = mt in ("qwen2", "qwen2_5_vl_text") or bool(
        c.get(bias_keys.get(mt, "attention_bias"), mt == "starcoder2")
    )
    if mt == "qwen2_moe":
        qkv_bias = c.get("qkv_bias", True)
    o_bias = qkv_bias and mt not in ("qwen2", "qwen2_5_vl_text", "qwen2_moe", "stablelm")
    n += (a * d + 2 * k * d) * qkv_bias + h * o_bias
    if mt in ("qwen3", "qwen3_moe", "gemma3_text"):
        n += 2 * d
    elif (
        mt == "olmo2"
        or (mt == "cohere" and c.get("use_qk_norm"))
        or (mt == "stablelm" and c.get("qk_layernorm"))
    ):
        n += a * d + k * d
    return n


def _norms(c: Cfg, mt: str) -> int:
    h = c["hidden_size"]
    per_layer = {"gemma2": 4, "gemma3_text": 4, "cohere": 1, "cohere2": 1}.get(mt, 2)
    if mt == "stablelm" and c.get("use_parallel_residual"):
        per_layer = 1
    bias = 2 if mt in ("starcoder2", "stablelm", "phimoe") else 1
    return per_layer * h * bias


def _head_dim(c: Cfg, mt: str) -> int:
    derived = c["hidden_size"] // c["num_attention_heads"]
    if mt in ("stablelm", "qwen2_5_vl_text"):
        return derived
    default = {"qwen3": 128, "gemma3_text": 256, "gemma2": 256, "llama4_text": 128}.get(mt)
    return c.get("head_dim") or default or derived


def _moe_block(c: Cfg, mt: str) -> int:
    h = c["hidden_size"]
    e = c.get("num_experts") or c.get("num_local_experts") or c.get("n_routed_experts")
    inter = c.get("moe_intermediate_size") or c["intermediate_size"]
    n = e * h + e * 3 * h * inter
    if mt == "qwen2_moe":
        n += 3 * h * c["shared_expert_intermediate_size"] + h
    elif mt == "llama4_text":
        n += 3 * h * c["intermediate_size"]
    elif mt.startswith("deepseek"):
        n += 3 * h * c["n_shared_experts"] * inter + e * (mt == "deepseek_v3")
    elif mt == "granitemoeshared":
        n += 3 * h * c.get("shared_intermediate_size", 0)
    return n


def _mla(c: Cfg) -> int:
    h, a = c["hidden_size"], c["num_attention_heads"]
    rq, rkv = c.get("q_lora_rank"), c["kv_lora_rank"]
    nope, rope, v = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
    q = h * a * (nope + rope) if rq is None else h * rq + rq + rq * a * (nope + rope)
    return q + h * (rkv + rope) + rkv + rkv * a * (nope + v) + a * v * h


def _is_moe_layer(c: Cfg, mt: str, i: int) -> bool:
    if mt in ("mixtral", "phimoe", "granitemoe", "granitemoeshared"):
        return True
    if mt in ("qwen2_moe", "qwen3_moe"):
        return (i + 1) % c.get("decoder_sparse_step", 1) == 0
    if mt == "llama4_text":
        return (i + 1) % c.get("interleave_moe_layer_step", 1) == 0
    if mt.startswith("deepseek"):
        return i >= c.get("first_k_dense_replace", 0)
    return False


def _falcon(c: Cfg) -> int:
    h, a, L, V = c["hidden_size"], c["num_attention_heads"], c["num_hidden_layers"], c["vocab_size"]
    d = h // a
    new = c.get("new_decoder_architecture", False)
    k = (c.get("num_kv_heads") or a) if new else (1 if c.get("multi_query", True) else a)
    ffn = c.get("ffn_hidden_size") or 4 * h
    b = bool(c.get("bias", False))
    n_ln = 2 if not c.get("parallel_attn", True) or new else 1
    layer = (a + 2 * k) * d * h + h * h + 2 * h * ffn + b * ((a + 2 * k) * d + h + ffn + h)
    tied = c.get("tie_word_embeddings", True)
    return V * h + L * (layer + 2 * n_ln * h) + 2 * h + (not tied) * V * h


def _classic(c: Cfg, mt: str) -> int:
    if mt == "gpt2":
        h, L, V, P = c["n_embd"], c["n_layer"], c["vocab_size"], c["n_positions"]
        inner = c.get("n_inner") or 4 * h
        layer = 4 * h + 3 * h * h + 3 * h + h * h + h + 2 * h * inner + inner + h
        return V * h + P * h + L * layer + 2 * h
    h, L, V, inner = (
        c["hidden_size"],
        c["num_hidden_layers"],
        c["vocab_size"],
        c["intermediate_size"],
    )
    layer = 4 * h + 3 * h * h + 3 * h + h * h + h + 2 * h * inner + inner + h  # NeoX
    return V * h + L * layer + 2 * h + V * h


def expected_params(cfg: Cfg) -> int:
    """The parameter count of ``cfg``'s language model by the formulas above."""
    mt, c = text_model(cfg)
    if mt == "falcon":
        return _falcon(c)
    if mt in ("gpt2", "gpt_neox"):
        return _classic(c, mt)
    h, L, V, inter = (
        c["hidden_size"],
        c["num_hidden_layers"],
        c["vocab_size"],
        c["intermediate_size"],
    )
    attn = _mla(c) if mt.startswith("deepseek") else _attention(c, mt, _head_dim(c, mt))
    dense_inter = c.get("intermediate_size_mlp", inter) if mt == "llama4_text" else inter
    if mt == "starcoder2":
        dense = 2 * h * inter + (inter + h) * c.get("use_bias", True)
    elif mt == "phi3":
        dense = 3 * h * inter
    else:
        dense = 3 * h * dense_inter
    total = V * h
    for i in range(L):
        ff = _moe_block(c, mt) if _is_moe_layer(c, mt, i) else dense
        total += attn + ff + _norms(c, mt)
    final_norm = h * (2 if mt in ("starcoder2", "stablelm", "phimoe") else 1)
    tied_default = mt in ("gemma2", "gemma3_text", "cohere", "cohere2", "starcoder2")
    tied = c.get("tie_word_embeddings")
    tied = tied_default if tied is None else tied
    head = 0 if tied else V * h + V * bool(c.get("lm_head_bias"))
    return total + final_norm + head
