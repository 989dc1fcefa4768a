"""Build a plan around a model preset (the default plan with another model)."""

from __future__ import annotations

from engine.plan import Plan, default_plan
from engine.sections.model import ModelSection

_BUILTIN = {"llama-3.1-8b": ModelSection()}


def plan_for_model_preset(name: str) -> Plan:
    """The default plan with the named model preset's architecture inline.

    Raises ``KeyError`` with a one-line message for an unknown preset.
    """
    key = name.strip().lower()
    if key not in _BUILTIN:
        raise KeyError(f"unknown model preset {name!r}; `memplan models` lists them")
    return default_plan().model_copy(update={"model": _BUILTIN[key]})
