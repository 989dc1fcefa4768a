"""Sizes read from an imported config, with a warning for every value MemPlan guessed.

A framework config can say ``${TP}``, ``$NLAYERS``, ``2*4``, ``0`` or ``-1`` where a size
belongs. The importers used to read each of those as "absent" (``as_int(...) or 1``) and
fill in a default without a word, so a plan could silently run TP 1 or the base plan's
sequence length. Here an absent key still takes its default quietly (that is what the
framework does too), but a value that is present and not a usable size takes the
default *and* a warning naming the key, the value and what was used instead.
"""

from __future__ import annotations

import math
import re
from typing import Any

from engine.errors import quote

_SHELL_VAR = re.compile(r"\$[{(A-Za-z_]")
_EXPRESSION = re.compile(r"^[\s\d()+\-*/%.]+$")


def _why_not(raw: Any, minimum: int) -> tuple[int | None, str]:
    """(the integer, "") or (None, why it is not a usable size)."""
    if isinstance(raw, bool):
        return None, "is true/false, not a number"
    if isinstance(raw, int):
        return (raw, "") if raw >= minimum else (None, f"is below {minimum}")
    if isinstance(raw, float):
        if not math.isfinite(raw) or raw != int(raw):
            return None, "is not a whole number"
        return _why_not(int(raw), minimum)
    if isinstance(raw, str):
        text = raw.strip()
        if _SHELL_VAR.search(text):
            return None, "is a shell variable MemPlan cannot expand"
        try:
            return _why_not(int(text), minimum)
        except ValueError:
            pass
        try:
            return _why_not(float(text), minimum)
        except (ValueError, OverflowError):
            pass
        if _EXPRESSION.match(text):
            return None, "is an expression MemPlan does not evaluate"
        return None, "is not a number"
    return None, f"is a {type(raw).__name__}, not a number"


class Sizes:
    """Collects the warnings of one import while reading its sizes."""

    def __init__(self) -> None:
        self.warnings: list[str] = []

    def size(self, key: str, raw: Any, default: int, used: str, minimum: int = 1) -> int:
        """``raw`` as a size of at least ``minimum``; absent (None) → ``default`` quietly,
        anything else unusable → ``default`` with a warning (``used`` says whose it is)."""
        if raw is None:
            return default
        value, why = _why_not(raw, minimum)
        if value is None:
            self.warnings.append(f"{key} = {quote(raw)} {why}: {used} {default} used instead")
            return default
        return value

    def optional(self, key: str, raw: Any, minimum: int = 1) -> int | None:
        """``raw`` as a size, or None (absent, or unusable with a warning: not set)."""
        if raw is None:
            return None
        value, why = _why_not(raw, minimum)
        if value is None:
            self.warnings.append(f"{key} = {quote(raw)} {why}: not read")
        return value
