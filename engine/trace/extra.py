"""Is the optional ``memplan[trace]`` extra installed? Answered without importing it.

The core app must start fast and work without torch, so nothing here imports torch or
transformers; :func:`require_trace_extra` only asks importlib whether they exist.
"""

from __future__ import annotations

import importlib.util
from importlib import metadata

from engine.trace.errors import TraceExtraMissing

TRACE_PACKAGES: tuple[str, ...] = ("torch", "transformers", "peft")
"""The packages the trace imports (accelerate is pulled in by transformers' helpers)."""

MIN_TORCH = (2, 13)
"""The trackers, the fake process group and FSDP2's meta init as the trace uses them
were established on torch 2.13 (shared/reference/tracing.md)."""

EXTRA_MESSAGE = (
    "trace needs the optional extra: pip install 'memplan[trace]' "
    "(CPU build: pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu "
    "first, then the extra)"
)


def _version_tuple(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split("+")[0].split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def missing_packages() -> list[str]:
    """The trace packages that cannot be imported here (empty when the extra is in)."""
    return [name for name in TRACE_PACKAGES if importlib.util.find_spec(name) is None]


def extra_problem() -> str | None:
    """Why the trace cannot run in this environment, or None when it can."""
    if missing_packages():
        return EXTRA_MESSAGE
    try:
        torch_version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        return EXTRA_MESSAGE
    if _version_tuple(torch_version) < MIN_TORCH:
        return f"{EXTRA_MESSAGE}; torch {torch_version} is installed, the trace needs ≥ 2.13"
    return None


def require_trace_extra() -> None:
    """Raise :class:`TraceExtraMissing` with the one-line install hint when needed."""
    problem = extra_problem()
    if problem is not None:
        raise TraceExtraMissing(problem)
