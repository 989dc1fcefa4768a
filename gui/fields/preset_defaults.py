"""The default a field's caption shows: the applied preset's value where a preset set it.

After applying the Llama-3.1-70B preset every architecture field still read "def." with
the built-in 8B plan's value (hidden "def. 4,096" beside 8,192): a default the plan no
longer has. A field a preset fills shows the preset's value; the rest the built-in
plan's. Model presets fill ``model.*`` (the name, the key and the architecture); an
accelerator preset fills its ``hardware.*`` figures.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from engine import presets as hardware_presets
from engine.plan import Plan, default_plan
from gui.frameworks import model_sources

_DEFAULT_VALUES: dict[str, Any] = default_plan().model_dump(mode="json")


def default_value(path: str) -> Any:
    """The built-in default plan's value at ``path`` (KeyError: no such leaf)."""
    node: Any = _DEFAULT_VALUES
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            raise KeyError(path)
        node = node[key]
    return node


@lru_cache(maxsize=32)
def _model_values(key: str) -> dict[str, Any]:
    name, spec = model_sources.load_preset(key)
    out = {"model.name": name, "model.preset": key}
    out |= {f"model.architecture.{k}": v for k, v in spec.model_dump(mode="json").items()}
    return out


@lru_cache(maxsize=32)
def _accelerator_values(key: str) -> dict[str, Any]:
    return dict(hardware_presets.accelerator_changes(key))


def preset_values(plan: Plan) -> dict[str, Any]:
    """Every field path a preset the plan holds filled, with the preset's value."""
    out: dict[str, Any] = {}
    try:
        if plan.model.preset:
            out |= _model_values(plan.model.preset)
        out |= _accelerator_values(plan.hardware.accelerator)
    except (KeyError, OSError, ValueError):  # a preset no longer known: the built-in ones
        pass
    return out


def plan_default(plan: Plan, path: str) -> Any:
    """The default a caption shows for ``path`` (KeyError: no such leaf)."""
    values = preset_values(plan)
    return values[path] if path in values else default_value(path)
