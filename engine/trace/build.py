"""Build the plan's model with transformers on the meta device: no weights, no network.

The config comes from a given ``config.json``, else the plan's imported one while it
still describes the architecture fields, else the fields themselves (``config_source``);
an imported config whose model transformers cannot build as a causal LM (e.g. Qwen2.5-VL's
text model) is set aside for the fields, with a note. The model is created on ``meta`` and only
materialised later, under the fake mode (``runner.py``): building under FakeTensorMode
breaks ``Module.to()`` / ``swap_tensors``, which PEFT's adapters call (tracing.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from engine.models.inventory import build_inventory, total_params
from engine.plan import Plan
from engine.trace.config_source import config_source, ledger_overrides
from engine.trace.dtypes import param_dtype
from engine.trace.errors import TraceFailed, TraceRefused
from engine.trace.hf_arch import hf_config_kwargs

ATTENTION: dict[str, str] = {"sdpa_flash": "sdpa", "eager": "eager"}
"""MemPlan ``runtime.attention`` → transformers ``attn_implementation`` (the others are
refused: CUDA-only kernels)."""


@dataclass
class MetaModel:
    """The model on meta, its decoder layers (the sharding and checkpointing units)."""

    model: Any
    config: Any
    model_type: str
    notes: list[str] = field(default_factory=list)

    @property
    def layers(self) -> list[Any]:
        return decoder_layers(self.model)


def decoder_layers(model: Any) -> list[Any]:
    """The decoder blocks, found by the class names transformers marks as never split
    across devices (``_no_split_modules``), so every family is handled alike."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    names = set(getattr(base, "_no_split_modules", None) or ())
    layers = [m for m in model.modules() if type(m).__name__ in names]
    if not layers:
        raise TraceFailed(f"found no decoder layers in {type(base).__name__}")
    return layers


def hf_config(plan: Plan, imported: Mapping[str, Any] | None = None) -> tuple[str, Any]:
    """``(model_type, config)`` for the plan: from ``imported`` (with the changes that
    make it the ledger's model, :func:`ledger_overrides`) or the architecture fields."""
    from transformers import AutoConfig

    if imported is not None:
        raw = dict(imported)
        model_type = str(raw.pop("model_type", ""))
        if not model_type:
            raise TraceRefused("the imported config.json has no model_type")
    else:
        model_type, raw = hf_config_kwargs(plan.model.architecture)
    try:
        config = AutoConfig.for_model(model_type, **raw)
        if imported is not None and (changes := ledger_overrides(config)):
            config = AutoConfig.for_model(model_type, **{**raw, **changes})
    except (ValueError, KeyError, TypeError) as exc:
        raise TraceRefused(f"transformers cannot build a {model_type} config: {exc}") from exc
    config.use_cache = False
    return model_type, config


def build_meta_model(plan: Plan, override: Mapping[str, Any] | None = None) -> MetaModel:
    """The plan's causal LM on meta, in training mode, in the plan's parameter dtype;
    ``override`` is a config.json given for this trace (see the module doc)."""
    source = config_source(plan, override)
    notes = list(source.notes)
    if source.origin == "plan":
        try:
            return _build(plan, source.config, notes)
        except TraceRefused as exc:
            why = str(exc).splitlines()[0][:160]
            notes = [f"{why}: the imported config.json is set aside, built from the fields"]
    return _build(plan, source.config if source.origin == "override" else None, notes)


def _build(plan: Plan, imported: Mapping[str, Any] | None, notes: list[str]) -> MetaModel:
    from transformers import AutoModelForCausalLM

    model_type, config = hf_config(plan, imported)
    attn = ATTENTION[plan.runtime.attention]
    try:
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(
                config, dtype=param_dtype(plan), attn_implementation=attn
            )
    except (ValueError, NotImplementedError, RuntimeError) as exc:
        raise TraceRefused(f"transformers cannot build the {model_type} model: {exc}") from exc
    model.train()
    built = MetaModel(model, config, model_type, list(notes))
    n_hf = sum(p.numel() for p in model.parameters())
    n_plan = total_params(build_inventory(plan.model.architecture))
    if n_hf != n_plan:
        built.notes.append(
            f"WARNING: transformers builds {n_hf:,} parameters for this architecture, the "
            f"plan's inventory counts {n_plan:,} ({n_hf - n_plan:+,}): the family's "
            "layout differs from the ledger's"
        )
    return built


def retie(model: Any) -> None:
    """Re-tie the output head to the embedding: ``to_empty`` can untie them and silently
    add a second copy (tracing.md)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    if getattr(base.config, "tie_word_embeddings", False):
        base.tie_weights()
        out, inp = base.get_output_embeddings(), base.get_input_embeddings()
        if out is not None and out.weight is not inp.weight:
            raise TraceFailed("the output head could not be re-tied to the embedding")
