"""Errors the engine raises with a message a user can act on, and the rule that keeps
every such message short: a bad value is quoted, never echoed whole (a 1 MB string in a
numeric field must give a one-line dialog, not a 1 MB one)."""

from __future__ import annotations

import reprlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

MAX_QUOTED_CHARS = 80
"""At most this many characters of a bad value appear in a message."""

MAX_MESSAGE_CHARS = 300
"""A file or plan error is at most this long (one sentence a dialog shows whole)."""

_PATH_PART_CHARS = 40
_LONG_INT_BITS = 256
_DIGITS_PER_BIT = 0.30103  # log10(2)

_REPR = reprlib.Repr()
_REPR.maxstring = MAX_QUOTED_CHARS
_REPR.maxother = MAX_QUOTED_CHARS
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 6
_REPR.maxlevel = 3


def clip(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` cut to ``limit`` characters, the cut marked with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def quote(value: object) -> str:
    """A short ``repr`` of a bad value for a message: at most ~80 characters, lone
    surrogates and control characters escaped, huge integers named by their size
    (their ``repr`` would raise under Python's int-digit limit)."""
    if isinstance(value, int) and value.bit_length() > _LONG_INT_BITS:
        return f"<an integer of about {round(value.bit_length() * _DIGITS_PER_BIT):,} digits>"
    return clip(_REPR.repr(value), MAX_QUOTED_CHARS + 2)


def field_path(parts: Sequence[object]) -> str:
    """A dotted field path for a message (``plan.batch.seq_len``; list items by index),
    each part shortened and escaped so a hostile key cannot make it long or unreadable."""
    shown = []
    for part in parts:
        text = str(part)
        if not text.isprintable():
            text = text.encode("ascii", "backslashreplace").decode("ascii")
        shown.append(clip(text, _PATH_PART_CHARS))
    return ".".join(shown)


@dataclass(frozen=True, slots=True)
class Problem:
    """One reason a plan cannot run, and the plan fields it concerns.

    ``fields`` are dotted plan paths (``parallelism.tp``, ``model.architecture.heads``)
    so a view can mark the inputs to change without reading the sentence; ``message``
    is the one wording of the rule, naming those paths.
    """

    fields: tuple[str, ...]
    message: str


class PlanError(ValueError):
    """The plan is valid field by field but cannot be computed as a whole.

    Examples: a layout whose ranks do not multiply to the world size, a TP size that
    does not divide the attention heads. It carries the :class:`Problem` s (a plain
    message becomes one problem without fields); ``str()`` is their messages joined
    by "; ", which is what callers print.
    """

    def __init__(self, problems: str | Iterable[Problem]) -> None:
        found = (Problem((), problems),) if isinstance(problems, str) else tuple(problems)
        self.problems: tuple[Problem, ...] = found
        super().__init__("; ".join(p.message for p in found))


def require(*found: Problem | None) -> None:
    """Raise :class:`PlanError` with every problem found (``None`` is a passed rule)."""
    problems = [p for p in found if p is not None]
    if problems:
        raise PlanError(problems)


class PlanFileError(ValueError):
    """A file that cannot be opened as a plan; ``str()`` is one sentence for the user,
    at most :data:`MAX_MESSAGE_CHARS` long; ``problems`` lists every problem found."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(clip(message))
        self.problems = [clip(p) for p in problems] if problems else [clip(message)]


class SaveError(OSError):
    """A plan that could not be written. ``strerror`` (and ``str()``) is the reason in
    words — "the folder /x is read-only" — for a message such as ``cannot write F: …``;
    the previous file, if any, is unchanged."""

    def __init__(self, reason: str) -> None:
        super().__init__(clip(reason))
        self.strerror = clip(reason)
