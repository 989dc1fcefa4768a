"""The Model section: which network, stored inline so a saved plan never drifts.

Besides the architecture the engine computes from, the section keeps the Hugging Face
``config.json`` it was imported from (when it was): ``memplan trace`` builds the model
from that file with ``AutoConfig``, so the traced model is the checkpoint's own, down to
the settings the architecture fields do not model.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from pydantic import Field

from engine.models.spec import ArchitectureSpec
from engine.sections.base import EvolvedSection, slot_hash

LLAMA_31_8B = ArchitectureSpec(
    family="llama",
    hidden=4096,
    layers=32,
    heads=32,
    kv_heads=8,
    intermediate=14336,
    vocab=128256,
    max_position=131072,
    tied_embeddings=False,
)
"""Llama-3.1-8B from its published config.json (meta-llama/Llama-3.1-8B); 8,030,261,248
parameters, which equals the count in its safetensors metadata."""


class ModelSection(EvolvedSection):
    """The model: a preset name for display, and the full architecture for computing."""

    name: str = Field(
        default="Llama-3.1-8B",
        min_length=1,
        max_length=200,
        description="Display name of the model.",
    )
    preset: str | None = Field(
        default="llama-3.1-8b",
        max_length=200,
        description="Preset this architecture came from (informational; the inline "
        "architecture is what is computed, so presets may change without changing plans).",
    )
    architecture: ArchitectureSpec = Field(default=LLAMA_31_8B)
    hf_config: dict[str, Any] | None = Field(
        default=None,
        description="The Hugging Face config.json the architecture was imported from (for "
        "a multimodal checkpoint, its language model's config); none for a preset or an "
        "architecture entered by hand. The trace builds the model from it while it still "
        "describes the architecture fields.",
    )

    LATER_INPUTS: ClassVar[dict[str, Any]] = {"hf_config": None}

    def __hash__(self) -> int:
        """Hashable although ``hf_config`` is a dict (plans key caches): by its JSON.
        Worked out once per object and kept in the section's hash slot
        (:func:`slot_hash`): each new plan's hash asks for it."""
        return slot_hash(self, self._fields_hash)

    def _fields_hash(self) -> int:
        config = None if self.hf_config is None else json.dumps(self.hf_config, sort_keys=True)
        return hash((self.name, self.preset, self.architecture, config))
