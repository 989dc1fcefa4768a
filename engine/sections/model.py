"""The Model section: which network, stored inline so a saved plan never drifts."""

from __future__ import annotations

from pydantic import Field

from engine.models.spec import ArchitectureSpec
from engine.sections.base import Section

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


class ModelSection(Section):
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
