"""Build a plan around a model preset (the default plan with another model)."""

from __future__ import annotations

from engine.models.presets import PresetError, load_preset
from engine.plan import Plan, default_plan
from engine.sections.model import ModelSection


def model_section_for(name: str) -> ModelSection:
    """The Model section for a preset, with its full architecture inline.

    Raises ``KeyError`` with a one-line message for an unknown preset.
    """
    try:
        display, spec = load_preset(name)
    except PresetError as exc:
        raise KeyError(f"{exc}; `memplan models` lists them") from exc
    return ModelSection(name=display, preset=name.strip().lower(), architecture=spec)


def plan_for_model_preset(name: str) -> Plan:
    """The default plan with the named model preset's architecture inline."""
    return default_plan().model_copy(update={"model": model_section_for(name)})
