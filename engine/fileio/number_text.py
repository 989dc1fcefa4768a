"""Numbers as people type them, read the same way on every path: ``--set``, the
window's fields and ``memplan new`` accept ``8192``, ``8,192``, ``8_192``, ``8k`` and
``1.5M`` (decimal suffixes: k = 10^3, M = 10^6, G = 10^9, T = 10^12 — counts of
tokens and GPUs, never bytes, which have their own units) and refuse the rest with one
sentence, so the same bad value reads the same wherever it was typed."""

from __future__ import annotations

import re

from engine.errors import quote

_SUFFIX = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_GROUPED = re.compile(r"[+-]?\d{1,3}(,\d{3})+(\.\d*)?[kmgt]?", re.IGNORECASE)
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)(e[+-]?\d+)?([kmgt])?", re.IGNORECASE)


def number_from_text(text: str) -> int | float | None:
    """The number ``text`` spells, or None when it spells none. Whole values are ints
    (``8k`` → 8000, ``1e3`` → 1000); thousands separators are dropped."""
    cleaned = text.strip().replace("_", "")
    if "," in cleaned and not _GROUPED.fullmatch(cleaned):
        return None  # "1,," or "1,2": not thousands separators
    cleaned = cleaned.replace(",", "")
    if len(cleaned) > 40 or not _NUMBER.fullmatch(cleaned):
        return None
    suffix = cleaned[-1].lower() if cleaned[-1].lower() in _SUFFIX else ""
    scale = _SUFFIX.get(suffix, 1)
    body = cleaned[: len(cleaned) - len(suffix)]
    if not suffix and re.fullmatch(r"[+-]?\d+", body):
        return int(body)
    value = float(body) * scale
    return int(value) if value.is_integer() and abs(value) < 2**63 else value


def expected_words(whole: bool) -> str:
    """The one sentence's verb phrase for a value that is not a number."""
    return "expected a whole number" if whole else "expected a number"


def not_a_number(text: object, whole: bool) -> str:
    """The one sentence for a value that is not a number (every path says it so)."""
    return f"{expected_words(whole)} (got {quote(text)})"
