"""Model sections and plans for models found in the local Hugging Face cache (offline).

Beside the other importers (:mod:`engine.exports.importers`), not in
:mod:`engine.presets`: reading a cache imports the model-folder importer (config,
safetensors index, checkpoint cross-check), which only ``memplan new --model`` and the
like need, not every command or report that looks up a preset.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.exports.import_guard import prove_reopens
from engine.models.hf_cache import CachedModel, ModelNotCachedError, import_cached_model
from engine.models.hf_reader import ConfigImportError
from engine.plan import Plan, default_plan
from engine.sections.model import ModelSection


@dataclass(frozen=True, slots=True)
class CachedModelSection:
    """A Model section read from the local Hugging Face cache, with what to tell the user."""

    section: ModelSection
    found: CachedModel
    messages: tuple[str, ...]  # import notes, then checkpoint cross-check mismatches


def model_section_for_cached(
    model_id: str, revision: str = "main", *, mtp: bool = False
) -> CachedModelSection:
    """The Model section for a model id found in the local Hugging Face cache (offline).

    Raises ``ModelNotCachedError`` (names the paths searched), ``ConfigImportError`` or
    ``SafetensorsError`` with a one-line message.
    """
    found = import_cached_model(model_id, revision, mtp=mtp)
    spec = found.imported.spec
    if spec is None:  # find_cached_model only returns snapshots holding a config.json
        raise ModelNotCachedError(f"{found.snapshot} has no readable config.json")
    check = found.imported.check
    messages = (*found.imported.notes, *(check.messages() if check is not None else ()))
    name = model_id.rsplit("/", 1)[-1]
    section = ModelSection(
        name=name, preset=None, architecture=spec, hf_config=found.imported.config
    )
    try:  # the plan it goes into must save and reopen (the kept config.json included)
        prove_reopens(plan_for_cached_model(default_plan(), section), name)
    except ValueError as exc:
        raise ConfigImportError(str(exc)) from None
    return CachedModelSection(section, found, messages)


def plan_for_cached_model(plan: Plan, section: ModelSection) -> Plan:
    """``plan`` with its Model section replaced (the rest of the plan kept)."""
    return Plan.model_validate(
        {**plan.model_dump(mode="json"), "model": section.model_dump(mode="json")}
    )
