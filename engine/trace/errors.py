"""What a trace can fail with; each carries one sentence a user can act on."""

from __future__ import annotations


class TraceError(Exception):
    """A trace that produced no number. ``str()`` is the one-line reason."""


class TraceExtraMissing(TraceError):
    """torch / transformers / peft are not installed (the ``memplan[trace]`` extra)."""


class TraceRefused(TraceError):
    """The plan uses something the trace cannot run faithfully on fake CPU tensors, so
    it refuses rather than report a partial number."""


class TraceFailed(TraceError):
    """PyTorch or transformers raised while building or stepping the model."""
