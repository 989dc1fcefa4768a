"""Which config the trace builds the model from, and what the reader is told about it.

Three sources, in order: a config.json given for this trace (``--hf-config``, the
override), the plan's imported config.json (``model.hf_config``), or the plan's
architecture fields (``hf_arch.py``). The plan's own import is used only while it still
describes the architecture fields — the fields are what the ledger counts, and a user
who edited them after the import wants the edited model traced — so a stale import is
set aside with a note, never silently traced. Pure Python: no torch here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from engine.models.hf_config import ConfigImportError, spec_from_hf_config
from engine.models.spec import ArchitectureSpec
from engine.plan import Plan

Origin = Literal["override", "plan", "fields"]


@dataclass(frozen=True, slots=True)
class ConfigSource:
    """The config to build from (None: from the architecture fields), and why."""

    config: Mapping[str, Any] | None
    origin: Origin
    notes: tuple[str, ...] = ()


def _explicit(spec: ArchitectureSpec) -> ArchitectureSpec:
    """``head_dim`` spelled out: unset means hidden ÷ heads, the same tensors."""
    return spec.model_copy(update={"head_dim": spec.dim_per_head})


def describes_architecture(plan: Plan, config: Mapping[str, Any]) -> bool:
    """Whether ``config`` reads back as the plan's architecture fields."""
    arch = plan.model.architecture
    try:
        described = spec_from_hf_config(config, mtp=arch.mtp_layers > 0)
    except ConfigImportError:
        return False
    return _explicit(described) == _explicit(arch)


def config_source(plan: Plan, override: Mapping[str, Any] | None = None) -> ConfigSource:
    """Where the trace of ``plan`` takes its transformers config from (module doc)."""
    if override is not None:
        return ConfigSource(override, "override", ("built from the given config.json",))
    imported = plan.model.hf_config
    if imported is None:
        return ConfigSource(None, "fields")
    model_type = imported.get("model_type", "?")
    if not describes_architecture(plan, imported):
        return ConfigSource(
            None,
            "fields",
            (
                f"the plan's imported config.json ({model_type}) no longer describes its "
                "architecture fields (edited since the import): built from the fields",
            ),
        )
    return ConfigSource(
        imported, "plan", (f"built from the plan's imported config.json ({model_type})",)
    )


def ledger_overrides(config: Any) -> dict[str, Any]:
    """Config keys to change so the built model is the one the ledger counts.

    The architecture fields do not model sliding windows (every layer attends fully)
    nor DeepSeek-V3's multi-token-prediction modules; on fake CPU tensors a window
    also turns SDPA's flash path into the math path, which saves the score matrix.
    ``config`` is a transformers config built once from the imported file.
    """
    out: dict[str, Any] = {}
    types = getattr(config, "layer_types", None)
    if types and any(t != "full_attention" for t in types):
        out["layer_types"] = ["full_attention"] * len(types)
    elif not types and getattr(config, "sliding_window", None) is not None:
        out["sliding_window"] = None
    if getattr(config, "use_sliding_window", False):
        out["use_sliding_window"] = False
    if getattr(config, "num_nextn_predict_layers", 0):
        out["num_nextn_predict_layers"] = 0
    return out
