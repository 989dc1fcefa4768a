"""Hugging Face ``config.json`` → :class:`ArchitectureSpec`.

Only keys that change the parameter inventory are read; everything else (rope scaling,
dropout, sliding windows) is ignored on purpose. A key the inventory needs that is
absent, of the wrong type, or set to a value the inventory cannot represent raises
:class:`ConfigImportError` with one sentence naming the key, so a user knows what to fix.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from engine.models.spec import ArchitectureSpec, Family, MLASpec, MoESpec, StoredDtype


class ConfigImportError(ValueError):
    """A config.json that cannot become an architecture spec; the message names the key."""


_DTYPES: dict[str, StoredDtype] = {
    "float32": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16",
}


class _Reader:
    """Typed access to one config dict, with errors that name the key."""

    def __init__(self, cfg: Mapping[str, Any], model_type: str) -> None:
        self.cfg = cfg
        self.model_type = model_type

    def get_int(self, key: str, default: int | None = None) -> int:
        value = self.cfg.get(key, default)
        if value is None:
            if key in self.cfg and default is not None:
                return default
            raise ConfigImportError(
                f"config.json is missing the key '{key}', which model_type "
                f"'{self.model_type}' needs"
            )
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigImportError(f"config.json key '{key}' must be an integer, not {value!r}")
        return value

    def opt_int(self, key: str) -> int | None:
        if self.cfg.get(key) is None:
            return None
        return self.get_int(key)

    def get_bool(self, key: str, default: bool) -> bool:
        value = self.cfg.get(key, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise ConfigImportError(f"config.json key '{key}' must be true or false, not {value!r}")
        return value

    def require(self, key: str, ok: Callable[[Any], bool], why: str, default: Any = None) -> None:
        value = self.cfg.get(key, default)
        if not ok(value):
            raise ConfigImportError(f"config.json key '{key}' = {value!r} is not supported: {why}")


def _stored_dtype(cfg: Mapping[str, Any]) -> StoredDtype:
    quant = cfg.get("quantization_config")
    if isinstance(quant, Mapping):
        if quant.get("quant_method") == "fp8" and quant.get("fmt", "e4m3") == "e4m3":
            return "fp8_e4m3"
        raise ConfigImportError(
            f"config.json key 'quantization_config' (quant_method "
            f"{quant.get('quant_method')!r}) is not supported; import the unquantised model"
        )
    raw = cfg.get("torch_dtype", cfg.get("dtype"))
    if raw is None:
        return "fp32"  # transformers saves float32 unless told otherwise
    if not isinstance(raw, str) or raw not in _DTYPES:
        raise ConfigImportError(f"config.json key 'torch_dtype' = {raw!r} is not a known dtype")
    return _DTYPES[raw]


def _common(r: _Reader, family: Family, tied_default: bool) -> dict[str, Any]:
    heads = r.get_int("num_attention_heads")
    return {
        "family": family,
        "hidden": r.get_int("hidden_size"),
        "layers": r.get_int("num_hidden_layers"),
        "heads": heads,
        "kv_heads": r.get_int("num_key_value_heads", heads),
        "head_dim": r.opt_int("head_dim"),
        "intermediate": r.get_int("intermediate_size"),
        "vocab": r.get_int("vocab_size"),
        "max_position": r.get_int("max_position_embeddings", 4096),
        "tied_embeddings": r.get_bool("tie_word_embeddings", tied_default),
        "stored_dtype": _stored_dtype(r.cfg),
    }


def _llama_like(r: _Reader, family: Family) -> dict[str, Any]:
    out = _common(r, family, tied_default=False)
    bias = r.get_bool("attention_bias", False)
    out.update(qkv_bias=bias, o_bias=bias, mlp_bias=r.get_bool("mlp_bias", False))
    if family == "qwen2":
        out.update(qkv_bias=True, o_bias=False)  # Qwen2 always biases q, k, v and never o
    if family == "qwen3":
        out["qk_norm"] = True
    return out


def _gemma(r: _Reader, family: Family) -> dict[str, Any]:
    out = _common(r, family, tied_default=True)
    bias = r.get_bool("attention_bias", False)
    out.update(
        head_dim=r.get_int("head_dim", 256),
        mlp="geglu",
        sandwich_norm=True,
        qkv_bias=bias,
        o_bias=bias,
        qk_norm=family == "gemma3",
    )
    return out


def _phi3(r: _Reader) -> dict[str, Any]:
    out = _common(r, "phi3", tied_default=False)
    out.update(fused_qkv=True, fused_gate_up=True)
    return out


def _mixtral(r: _Reader) -> dict[str, Any]:
    out = _common(r, "mixtral", tied_default=False)
    out["moe"] = MoESpec(
        num_experts=r.get_int("num_local_experts"),
        top_k=r.get_int("num_experts_per_tok"),
        expert_intermediate=out["intermediate"],
    )
    return out


def _qwen3_moe(r: _Reader) -> dict[str, Any]:
    out = _llama_like(r, "qwen3")
    out["family"] = "qwen3_moe"
    r.require("decoder_sparse_step", lambda v: v in (None, 1), "every layer must be MoE", 1)
    r.require("mlp_only_layers", lambda v: not v, "every layer must be MoE", None)
    out["moe"] = MoESpec(
        num_experts=r.get_int("num_experts"),
        top_k=r.get_int("num_experts_per_tok"),
        expert_intermediate=r.get_int("moe_intermediate_size"),
    )
    return out


def _deepseek_v3(r: _Reader) -> dict[str, Any]:
    out = _common(r, "deepseek_v3", tied_default=False)
    out["qkv_bias"] = r.get_bool("attention_bias", False)
    r.require(
        "moe_layer_freq",
        lambda v: v in (None, 1),
        "every layer after the dense ones must be MoE",
        1,
    )
    out["head_dim"] = None
    moe_inter = r.get_int("moe_intermediate_size")
    out["moe"] = MoESpec(
        num_experts=r.get_int("n_routed_experts"),
        top_k=r.get_int("num_experts_per_tok"),
        expert_intermediate=moe_inter,
        shared_experts=r.get_int("n_shared_experts", 0),
        shared_intermediate=moe_inter,
        first_dense_layers=r.get_int("first_k_dense_replace", 0),
        router_bias=r.cfg.get("topk_method") == "noaux_tc",
    )
    out["mla"] = MLASpec(
        q_lora_rank=r.opt_int("q_lora_rank"),
        kv_lora_rank=r.get_int("kv_lora_rank"),
        qk_nope_head_dim=r.get_int("qk_nope_head_dim"),
        qk_rope_head_dim=r.get_int("qk_rope_head_dim"),
        v_head_dim=r.get_int("v_head_dim"),
    )
    out["mtp_layers"] = r.get_int("num_nextn_predict_layers", 0)
    return out


def _gpt2(r: _Reader) -> dict[str, Any]:
    hidden = r.get_int("n_embd")
    return {
        "family": "gpt2",
        "hidden": hidden,
        "layers": r.get_int("n_layer"),
        "heads": r.get_int("n_head"),
        "kv_heads": r.get_int("n_head"),
        "intermediate": r.get_int("n_inner", 4 * hidden),
        "vocab": r.get_int("vocab_size"),
        "max_position": r.get_int("n_positions"),
        "tied_embeddings": r.get_bool("tie_word_embeddings", True),
        "mlp": "gelu",
        "norm": "layernorm",
        "norm_bias": True,
        "qkv_bias": True,
        "o_bias": True,
        "mlp_bias": True,
        "fused_qkv": True,
        "position": "learned",
        "stored_dtype": _stored_dtype(r.cfg),
    }


def _gpt_neox(r: _Reader) -> dict[str, Any]:
    out = _common(r, "gpt_neox", tied_default=False)
    bias = r.get_bool("attention_bias", True)
    out.update(
        mlp="gelu",
        norm="layernorm",
        norm_bias=True,
        qkv_bias=bias,
        o_bias=bias,
        mlp_bias=True,
        fused_qkv=True,
    )
    return out


_BUILDERS: dict[str, Callable[[_Reader], dict[str, Any]]] = {
    "llama": lambda r: _llama_like(r, "llama"),
    "mistral": lambda r: _llama_like(r, "mistral"),
    "qwen2": lambda r: _llama_like(r, "qwen2"),
    "qwen3": lambda r: _llama_like(r, "qwen3"),
    "gemma2": lambda r: _gemma(r, "gemma2"),
    "gemma3_text": lambda r: _gemma(r, "gemma3"),
    "phi3": _phi3,
    "mixtral": _mixtral,
    "qwen3_moe": _qwen3_moe,
    "deepseek_v3": _deepseek_v3,
    "gpt2": _gpt2,
    "gpt_neox": _gpt_neox,
}

SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(sorted(_BUILDERS))


def spec_from_hf_config(cfg: Mapping[str, Any]) -> ArchitectureSpec:
    """The architecture a parsed ``config.json`` describes."""
    if not isinstance(cfg, Mapping):
        raise ConfigImportError("config.json must hold a JSON object at the top level")
    model_type = cfg.get("model_type")
    if model_type is None:
        raise ConfigImportError("config.json is missing the key 'model_type'")
    if "text_config" in cfg or "vision_config" in cfg:
        raise ConfigImportError(
            f"config.json key 'text_config' / 'vision_config' (model_type {model_type!r}) "
            "describes a multimodal model; import its text-only language model instead"
        )
    builder = _BUILDERS.get(str(model_type))
    if builder is None:
        raise ConfigImportError(
            f"config.json key 'model_type' = {model_type!r} is not supported; supported: "
            + ", ".join(SUPPORTED_MODEL_TYPES)
        )
    fields = builder(_Reader(cfg, str(model_type)))
    try:
        return ArchitectureSpec(**fields)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "config"
        raise ConfigImportError(
            f"config.json gives an invalid architecture ({where}): {err['msg']}"
        ) from None


def load_hf_config(path: str | Path) -> ArchitectureSpec:
    """Read ``config.json`` (or a folder holding it) and convert it."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigImportError(f"cannot read {p}: {exc.strerror or exc}") from None
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigImportError(f"{p} is not valid JSON (line {exc.lineno}: {exc.msg})") from None
    return spec_from_hf_config(cfg)
