"""Hugging Face ``config.json`` → :class:`ArchitectureSpec`, as transformers builds it.

Only keys that change the parameter inventory are read; everything else (rope scaling,
dropout, sliding windows) is ignored on purpose. Absent keys take transformers' default
for the family (``hf_dense`` / ``hf_moe`` hold the tables); a value MemPlan cannot
express raises :class:`ConfigImportError` naming the key, never an approximation.

Multimodal wrappers (Gemma-3, Mistral-3, Qwen2.5-VL, Llama-4) are imported through their
``text_config``: the language model is counted and a note says the vision tower is not.
A note is also returned for every choice a user may want to revisit (DeepSeek-V3's MTP).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from engine.errors import quote
from engine.fileio.bounded_read import MAX_CONFIG_BYTES, FileRefused, read_text
from engine.fileio.strict_json import MAX_DEPTH, loads_config
from engine.models import hf_dense as d
from engine.models import hf_moe as m
from engine.models.hf_reader import ConfigImportError, Reader
from engine.models.spec import ArchitectureSpec

__all__ = [
    "SUPPORTED_MODEL_TYPES",
    "ConfigImport",
    "ConfigImportError",
    "import_hf_config",
    "load_hf_config",
    "read_config_dict",
    "read_hf_config",
    "resolve_auto_dtype",
    "spec_from_hf_config",
]

Builder = Callable[[Reader], d.Fields]

_FAMILIES: dict[str, tuple[Mapping[str, Any], Builder]] = {
    "llama": (d.LLAMA_DEFAULTS, lambda r: d.llama_like(r, "llama")),
    "granite": (d.GRANITE_DEFAULTS, lambda r: d.llama_like(r, "granite")),
    "olmo2": (d.OLMO2_DEFAULTS, lambda r: d.llama_like(r, "olmo2")),
    "qwen3": (d.QWEN3_DEFAULTS, lambda r: d.llama_like(r, "qwen3")),
    "mistral": (d.MISTRAL_DEFAULTS, lambda r: d.unbiased(r, "mistral")),
    "phi3": (d.PHI3_DEFAULTS, lambda r: d.unbiased(r, "phi3")),
    "qwen2": (d.QWEN2_DEFAULTS, d.qwen2),
    "qwen2_5_vl_text": (d.QWEN25_VL_TEXT_DEFAULTS, lambda r: d.qwen2(r, "derived")),
    "gemma2": (d.GEMMA2_DEFAULTS, lambda r: d.gemma(r, "gemma2")),
    "gemma3_text": (d.GEMMA3_TEXT_DEFAULTS, lambda r: d.gemma(r, "gemma3")),
    "cohere": (d.COHERE_DEFAULTS, lambda r: d.cohere(r, "cohere")),
    "cohere2": (d.COHERE2_DEFAULTS, lambda r: d.cohere(r, "cohere2")),
    "starcoder2": (d.STARCODER2_DEFAULTS, d.starcoder2),
    "stablelm": (d.STABLELM_DEFAULTS, d.stablelm),
    "falcon": (d.FALCON_DEFAULTS, d.falcon),
    "gpt2": (d.GPT2_DEFAULTS, d.gpt2),
    "gpt_neox": (d.GPT_NEOX_DEFAULTS, d.gpt_neox),
    "mixtral": (m.MIXTRAL_DEFAULTS, m.mixtral),
    "phimoe": (m.PHIMOE_DEFAULTS, m.phimoe),
    "qwen2_moe": (m.QWEN2_MOE_DEFAULTS, m.qwen2_moe),
    "qwen3_moe": (m.QWEN3_MOE_DEFAULTS, m.qwen3_moe),
    "granitemoe": (m.GRANITEMOE_DEFAULTS, m.granitemoe),
    "granitemoeshared": (m.GRANITEMOE_DEFAULTS, m.granitemoe),
    "llama4_text": (m.LLAMA4_TEXT_DEFAULTS, m.llama4_text),
    "deepseek_v2": (m.DEEPSEEK_V2_DEFAULTS, m.deepseek_v2),
}
"""model_type → (transformers' defaults, builder). DeepSeek-V3 takes the MTP switch."""


@dataclass(frozen=True, slots=True)
class _Wrapper:
    """A multimodal wrapper: its text model's type and its own ``tie_word_embeddings``."""

    text_type: str
    tie_default: bool
    tie_from_text: bool  # transformers forwards text_config's true (Qwen2.5-VL BC rule)
    auto_class: str  # what transformers builds, for the note
    absent_text: Mapping[str, Any] | None = None  # text_config when the file has none


_MISTRAL3_TEXT = {
    "head_dim": 128,
    "hidden_size": 5120,
    "intermediate_size": 32768,
    "max_position_embeddings": 131072,
    "num_attention_heads": 32,
    "num_hidden_layers": 40,
    "num_key_value_heads": 8,
    "vocab_size": 131072,
}
"""``Mistral3Config.sub_configs_defaults['text_config']``: used only when the file gives
no text_config at all (a given dict starts from MistralConfig's own defaults)."""

_WRAPPERS: dict[str, _Wrapper] = {
    "gemma3": _Wrapper("gemma3_text", True, False, "Gemma3ForConditionalGeneration"),
    "mistral3": _Wrapper(
        "mistral", True, False, "Mistral3ForConditionalGeneration", _MISTRAL3_TEXT
    ),
    "qwen2_5_vl": _Wrapper("qwen2_5_vl_text", False, True, "Qwen2_5_VLForConditionalGeneration"),
    "llama4": _Wrapper("llama4_text", False, True, "Llama4ForCausalLM"),
}
"""Tying follows the wrapper's config in transformers 5 (``PreTrainedModel.
get_expanded_tied_weights_keys`` reads ``self.config``); Llama-4's causal LM is built
from ``text_config`` alone, whose own default (false) applies."""

SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(sorted([*_FAMILIES, "deepseek_v3", *_WRAPPERS]))


@dataclass(frozen=True, slots=True)
class ConfigImport:
    """The architecture a config describes, and the notes a user should read with it.

    ``config`` is the config the architecture was read from, as a plan keeps it
    (``model.hf_config``, which the trace builds from): the file itself, or for a
    multimodal wrapper its language model's config with that model's ``model_type`` —
    the part the architecture describes and the ledger counts.
    """

    spec: ArchitectureSpec
    notes: tuple[str, ...] = ()
    config: dict[str, Any] = field(default_factory=dict)


def _text_config(cfg: Mapping[str, Any], mt: str, w: _Wrapper) -> tuple[dict[str, Any], str]:
    """The language model's config dict, with the wrapper's dtype and tying applied."""
    raw = cfg.get("text_config")
    if raw is None and mt == "qwen2_5_vl":  # hub files keep the text keys at the top level
        raw = {k: v for k, v in cfg.items() if k not in ("model_type", "vision_config")}
    elif raw is None:
        raw = w.absent_text or {}
    if not isinstance(raw, Mapping):
        raise ConfigImportError(
            f"config.json key 'text_config' (model_type {quote(mt)}) must be an object"
        )
    text = dict(raw)
    text_type = str(text.get("model_type") or w.text_type)
    text.setdefault("torch_dtype", cfg.get("torch_dtype", cfg.get("dtype")))
    tie = cfg.get("tie_word_embeddings")
    if mt == "llama4":
        tie = text.get("tie_word_embeddings")
    if tie is None:
        tie = w.tie_default
    if w.tie_from_text and text.get("tie_word_embeddings") is True:
        tie = True
    text["tie_word_embeddings"] = tie
    if text_type == "qwen2_5_vl":  # old checkpoints mislabel the text model
        text_type = "qwen2_5_vl_text"
    return text, text_type


def _build(cfg: Mapping[str, Any], model_type: str, mtp: bool) -> dict[str, Any]:
    if model_type == "deepseek_v3":
        return m.deepseek_v3(Reader(cfg, model_type, m.DEEPSEEK_V3_DEFAULTS), mtp)
    family = _FAMILIES.get(model_type)
    if family is None:
        raise ConfigImportError(
            f"config.json key 'model_type' = {quote(model_type)} is not supported (MemPlan "
            f"imports {len(SUPPORTED_MODEL_TYPES)} model types, e.g. llama, qwen2, mistral, "
            "mixtral, deepseek_v3)"
        )
    defaults, builder = family
    return builder(Reader(cfg, model_type, defaults))


def _validated(fields: dict[str, Any]) -> ArchitectureSpec:
    try:
        return ArchitectureSpec(**fields)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "config"
        raise ConfigImportError(
            f"config.json gives an invalid architecture ({where}): {err['msg']}"
        ) from None


def import_hf_config(cfg: Mapping[str, Any], *, mtp: bool = False) -> ConfigImport:
    """The architecture a parsed ``config.json`` describes, with notes.

    ``mtp``: also train DeepSeek-V3's multi-token-prediction modules (off by default,
    as transformers builds the model).
    """
    if not isinstance(cfg, Mapping):
        raise ConfigImportError("config.json must hold a JSON object at the top level")
    model_type = cfg.get("model_type")
    if model_type is None:
        raise ConfigImportError("config.json is missing the key 'model_type'")
    mt = str(model_type)
    notes: list[str] = []
    wrapper = _WRAPPERS.get(mt)
    if wrapper is not None:
        text, text_type = _text_config(cfg, mt, wrapper)
        spec = _validated(_build(text, text_type, mtp))
        built = (
            "which transformers' AutoModelForCausalLM builds with its vision tower"
            if mt == "gemma3"
            else "which transformers builds for image-text training"
        )
        if mt == "llama4":
            built = "while AutoModelForCausalLM builds Llama4ForCausalLM, text only"
        notes.append(
            f"{mt} is a multimodal model ({wrapper.auto_class}, {built}): its language "
            f"model ({text_type}) is counted; the vision tower and projector are not"
        )
        return ConfigImport(spec, tuple(notes), {**text, "model_type": text_type})
    if "text_config" in cfg or "vision_config" in cfg:
        raise ConfigImportError(
            f"config.json key 'text_config' / 'vision_config' (model_type {quote(mt)}) "
            "describes a multimodal model MemPlan does not import; import its language "
            "model's config instead"
        )
    spec = _validated(_build(cfg, mt, mtp))
    declared = cfg.get("num_nextn_predict_layers", 1 if mt == "deepseek_v3" else 0)
    if mt == "deepseek_v3" and not mtp and isinstance(declared, int) and declared > 0:
        notes.append(
            f"the config declares {declared} multi-token-prediction module(s) "
            "(num_nextn_predict_layers); transformers does not build them, so they are not "
            "counted: set model.architecture.mtp_layers (or --mtp) to train them"
        )
    return ConfigImport(spec, tuple(notes), dict(cfg))


def spec_from_hf_config(cfg: Mapping[str, Any], *, mtp: bool = False) -> ArchitectureSpec:
    """The architecture a parsed ``config.json`` describes (see :func:`import_hf_config`)."""
    return import_hf_config(cfg, mtp=mtp).spec


KEPT_CONFIG_DEPTH = MAX_DEPTH - 4
"""How deep a config.json may nest: a plan keeps it as ``model.hf_config``, four levels
below the top of the ``.memplan`` file, and the file must stay within the loader's
:data:`MAX_DEPTH` to reopen."""

_TORCH_OF_STORED = {
    "BF16": "bfloat16",
    "F16": "float16",
    "F32": "float32",
    "F8_E4M3": "bfloat16",  # an FP8 checkpoint says so in quantization_config
}


def read_config_dict(path: str | Path, within: Path | None = None) -> dict[str, Any]:
    """A ``config.json`` (or the one in a folder) parsed with the plan loader's limits:
    a regular file of at most 1 MiB (``MAX_CONFIG_BYTES``), nesting a plan can keep, no
    NaN or Infinity (JSON has neither: a plan would store them as null), no number over
    100 digits, no key given twice, nothing outside ``within``. Refusals are
    :class:`ConfigImportError` sentences naming the file and the key."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    try:
        text = read_text(p, MAX_CONFIG_BYTES, within)
        cfg = loads_config(text, p.name, KEPT_CONFIG_DEPTH)
    except FileRefused as exc:
        raise ConfigImportError(str(exc)) from None
    except ValueError as exc:  # strict_json.ConfigFileError
        raise ConfigImportError(str(exc)) from None
    if not isinstance(cfg, dict):
        raise ConfigImportError(f"{p.name} must hold a JSON object at the top level")
    return cfg


def resolve_auto_dtype(
    cfg: dict[str, Any], by_dtype: Mapping[str, int] | None
) -> tuple[dict[str, Any], str | None, bool]:
    """``torch_dtype: "auto"`` means "as stored": (config with the dtype the checkpoint
    stores most of, what was done, whether it was a guess). With no weights to read
    (``by_dtype`` None or empty) bf16 is assumed, and that is a guess the user is told."""
    keys = [k for k in ("torch_dtype", "dtype") if cfg.get(k) == "auto"]
    if not keys:
        return cfg, None, False
    clean = {k: v for k, v in cfg.items() if k not in keys}
    if by_dtype:
        stored = max(by_dtype, key=lambda name: by_dtype[name])
        clean["torch_dtype"] = _TORCH_OF_STORED.get(stored, "bfloat16")
        return (
            clean,
            f"torch_dtype 'auto' = {clean['torch_dtype']} (the checkpoint's {stored})",
            False,
        )
    clean["torch_dtype"] = "bfloat16"
    return clean, "torch_dtype 'auto' with no weights to read: assumed bfloat16", True


def read_hf_config(path: str | Path, *, mtp: bool = False) -> ConfigImport:
    """Read ``config.json`` (or a folder holding it) and convert it, with notes (a
    ``torch_dtype`` of "auto" is assumed bf16 here, with a note: no weights are read)."""
    cfg, note, _ = resolve_auto_dtype(read_config_dict(path), None)
    got = import_hf_config(cfg, mtp=mtp)
    if note is None:
        return got
    return ConfigImport(got.spec, (note, *got.notes), got.config)


def load_hf_config(path: str | Path, *, mtp: bool = False) -> ArchitectureSpec:
    """Read ``config.json`` (or a folder holding it) and convert it."""
    return read_hf_config(path, mtp=mtp).spec
