"""Where model architectures come from: presets and Hugging Face imports.

Thin adapters from the engine's catalogue (``engine.models.presets``) and importers
(``engine.models.hf_config``, ``engine.models.importer``) to what the Model tab needs:
(display name, architecture) pairs, plan changes, and the folder cross-check messages.
An import keeps the config.json it read in the plan (``model.hf_config``, which the
trace builds from); a preset clears it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.exports.import_guard import ImportRefused, refusal
from engine.models import presets
from engine.models.hf_config import ConfigImportError, read_hf_config
from engine.models.importer import import_model_folder
from engine.models.safetensors_index import SafetensorsError
from engine.models.spec import ArchitectureSpec

IMPORT_ERRORS = (ConfigImportError, SafetensorsError, OSError, ValueError)
"""Errors an import raises with a one-sentence message for the user."""


def preset_titles() -> list[tuple[str, str]]:
    """(key, display name) of every model preset, at once (no inventory is built)."""
    return [(name, display) for name, display, _ in presets.preset_titles()]


def preset_keys() -> list[str]:
    """Every model preset's key, in the chooser's order."""
    return [name for name, _ in preset_titles()]


def titled(display: str, total: int) -> str:
    """A preset's chooser text once its exact parameter count is known."""
    return f"{display} — {total:,} params"


def load_preset(key: str) -> tuple[str, ArchitectureSpec]:
    """(display name, architecture) of a preset; ``PresetError`` for an unknown key."""
    return presets.load_preset(key)


@dataclass(frozen=True, slots=True)
class ModelImport:
    """What an import puts into the plan, and what to tell the user about it."""

    name: str
    spec: ArchitectureSpec
    config: dict[str, Any] | None
    messages: tuple[str, ...] = ()  # the checkpoint cross-check's mismatches
    notes: tuple[str, ...] = ()  # what the import assumed or left out (never silent)

    @property
    def changes(self) -> dict[str, Any]:
        return model_changes(None, self.name, self.spec, self.config)


def _one_sentence(path: str, exc: Exception) -> ImportRefused:
    return refusal(Path(path).name or path, exc)


def import_config(path: str) -> ModelImport:
    """A Hugging Face ``config.json`` (or the folder holding it) → the architecture.
    Every failure is an :class:`ImportRefused` sentence (one of ``IMPORT_ERRORS``)."""
    p = Path(path)
    name = (p.parent if p.is_file() else p).name or p.stem
    try:
        imported = read_hf_config(p)
    except Exception as exc:  # even MemPlan's own defect reaches the dialog as a sentence
        raise _one_sentence(path, exc) from exc
    return ModelImport(name, imported.spec, imported.config, (), imported.notes)


def import_folder(path: str) -> ModelImport:
    """A model folder → the architecture, with the cross-check messages.

    The architecture comes from its ``config.json``; the safetensors headers (read without
    the weights) are compared with it, and every mismatch is returned as a sentence.
    """
    try:
        result = import_model_folder(path)
    except Exception as exc:
        raise _one_sentence(path, exc) from exc
    if result.spec is None:
        raise SafetensorsError(
            f"{path} has safetensors weights but no config.json: the architecture cannot be "
            "derived from tensor names alone; import its config.json or enter it by hand"
        )
    messages = tuple(result.check.messages()) if result.check is not None else ()
    notes = (*result.resolutions, *result.notes)
    return ModelImport(Path(path).name, result.spec, result.config, messages, notes)


def model_changes(
    key: str | None, name: str, spec: ArchitectureSpec, config: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The plan changes that put an architecture into the Model section, as one step
    (with the config.json it came from, or none: a preset leaves no stale import)."""
    return {
        "model.name": name,
        "model.preset": key,
        "model.architecture": spec.model_dump(mode="json"),
        "model.hf_config": config,
    }
