"""Shared building blocks for plan sections: frozen strict models and ranges."""

from __future__ import annotations

from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, model_validator

CANONICAL_CONTEXT: Final[dict[str, Any]] = {"canonical": True}
"""Serialization context of a plan's canonical form (what its config hash is taken of).
A section may leave out, in that form only, an optional input that holds its default
``None`` — so adding such an input to the schema changes the hash of no existing plan
(``ModelSection.hf_config``). Every other dump (files, field paths) keeps every key."""


class Section(BaseModel):
    """Base of every plan section: immutable, and unknown fields are an error.

    Frozen so a plan can be shared between the GUI, the engine and the undo stack
    without copies; ``extra="forbid"`` so a typo in a file is reported, not ignored.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)


class FractionRange(Section):
    """An uncertain fraction given as a low–high band (e.g. allocator reserve 0.10–0.36)."""

    low: float = Field(ge=0.0, le=10.0)
    high: float = Field(ge=0.0, le=10.0)

    @model_validator(mode="after")
    def _ordered(self) -> FractionRange:
        if self.low > self.high:
            raise ValueError(f"low ({self.low}) must not exceed high ({self.high})")
        return self


class ByteRange(Section):
    """An uncertain byte count given as a low–high band (e.g. CUDA context)."""

    low: int = Field(ge=0, le=10**15)
    high: int = Field(ge=0, le=10**15)

    @model_validator(mode="after")
    def _ordered(self) -> ByteRange:
        if self.low > self.high:
            raise ValueError(f"low ({self.low}) must not exceed high ({self.high})")
        return self
