"""Read a plan file's JSON so that no file, however hostile, gets past with more than a
one-sentence refusal.

Python's ``json`` would otherwise crash or mislead on things a plan never contains:
nesting a thousand levels deep (``RecursionError``), a 5,000-digit number (``ValueError``
from the int-digit limit), ``NaN`` / ``Infinity`` and numbers that overflow to infinity,
a key given twice (the last silently wins), half of a UTF-16 surrogate pair (loads, then
every save fails to encode it) or a file so large it exhausts memory. Each is refused
here with the field path; a UTF-8 byte-order mark, which some editors write, is accepted.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from itertools import accumulate
from typing import Any

from engine.errors import PlanFileError, field_path, quote

MAX_FILE_BYTES = 16 * 2**20
"""A plan with its measured records is a few hundred KB; 16 MiB leaves room and stops a
multi-GB file (or a device) from being read into memory."""

MAX_DEPTH = 64
"""A plan nests about six levels deep; refusing deeper keeps the parser's recursion, and
everything after it, far from Python's limit."""

MAX_NUMBER_CHARS = 100
"""The longest number literal accepted (a float's full repr is under 25 characters)."""

BOM = "\ufeff"

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_BRACKET_STEP = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class _Bad:
    """A value the parser met that a plan cannot hold; reported with its path later."""

    def __init__(self, problem: str) -> None:
        self.problem = problem


class _DuplicateKeys(dict[str, Any]):
    """A JSON object in which a key appeared more than once."""

    duplicate = ""


def max_depth(text: str) -> int:
    """How deep brackets nest outside strings: an upper bound on the parser's recursion
    (exact for valid JSON), computed at C speed so a 16 MB file costs well under a
    second."""
    skeleton = _STRING.sub("", text).encode("utf-8", "replace").translate(None, _NOT_BRACKET)
    steps = memoryview(skeleton.translate(_BRACKET_STEP)).cast("b")
    return max(accumulate(steps), default=0)


class _Hooks:
    """The parser's hooks for one file: they mark what a plan cannot hold, to be
    reported with its path after parsing (a hook does not know where it is)."""

    def __init__(self) -> None:
        self.flagged = False

    def _bad(self, problem: str) -> _Bad:
        self.flagged = True
        return _Bad(problem)

    def number(self, literal: str, kind: type[int] | type[float]) -> Any:
        if len(literal) > MAX_NUMBER_CHARS:
            return self._bad(f"a number {len(literal):,} characters long is not a plan value")
        value = kind(literal)
        if isinstance(value, float) and not math.isfinite(value):
            return self._bad(f"{quote(literal)} is too large for a number")
        return value

    def integer(self, literal: str) -> Any:
        return self.number(literal, int)

    def real(self, literal: str) -> Any:
        return self.number(literal, float)

    def constant(self, literal: str) -> _Bad:
        return self._bad(f"{literal} is not a number JSON allows")

    def obj(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) == len(pairs):
            return obj
        self.flagged = True
        marked = _DuplicateKeys(obj)
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                marked.duplicate = key
                break
            seen.add(key)
        return marked


def _walk(
    node: Any, path: tuple[str | int, ...] = ()
) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    """Every value with its path, depth first (the tree is at most MAX_DEPTH deep)."""
    yield path, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _walk(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _walk(value, (*path, i))


def _first_problem(doc: Any, check_surrogates: bool) -> str | None:
    for path, node in _walk(doc):
        where = field_path(path) or "the top level"
        if isinstance(node, _Bad):
            return f"{where}: {node.problem}"
        if isinstance(node, _DuplicateKeys):
            return (
                f"{field_path((*path, node.duplicate))}: this key appears more than once "
                "(which one was meant is ambiguous)"
            )
        if not check_surrogates:
            continue
        texts = [node] if isinstance(node, str) else list(node) if isinstance(node, dict) else []
        for text in texts:
            if isinstance(text, str) and _LONE_SURROGATE.search(text):
                key_or_value = "" if isinstance(node, str) else f" (in the key {quote(text)})"
                return (
                    f"{where}: holds half of a character (a lone UTF-16 surrogate){key_or_value}; "
                    "delete or retype that character"
                )
    return None


def decode(raw: bytes, name: str) -> str:
    """The file's text: UTF-8 with an optional byte-order mark."""
    if len(raw) > MAX_FILE_BYTES:
        raise PlanFileError(
            f"not a MemPlan plan: {name} is over {MAX_FILE_BYTES // 2**20} MiB, far larger "
            "than any plan"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PlanFileError(
            f"not a MemPlan file: {name} is not UTF-8 text (byte {exc.start:,} is not valid)"
        ) from exc
    return text.removeprefix(BOM)


def loads(text: str) -> Any:
    """Parse JSON text, refusing what a plan cannot contain (see the module docstring)."""
    if max_depth(text) > MAX_DEPTH:
        raise PlanFileError(
            f"not a MemPlan plan: it nests more than {MAX_DEPTH} levels deep (a plan needs "
            "about six)"
        )
    try:
        doc, problem = _parsed(text)
    except json.JSONDecodeError as exc:
        raise PlanFileError(
            f"not a MemPlan file: it is not valid JSON (line {exc.lineno}, column {exc.colno}: "
            f"{exc.msg})"
        ) from exc
    if problem:
        raise PlanFileError(problem)
    return doc


def _parsed(text: str) -> tuple[Any, str | None]:
    """``text`` parsed with the loader's hooks, and the first thing in it a plan cannot
    hold (None when nothing): the one parse ``loads`` and ``loads_config`` share."""
    hooks = _Hooks()
    doc = json.loads(
        text,
        object_pairs_hook=hooks.obj,
        parse_int=hooks.integer,
        parse_float=hooks.real,
        parse_constant=hooks.constant,
    )
    surrogates = bool(_SURROGATE_ESCAPE.search(text))
    return doc, (_first_problem(doc, surrogates) if hooks.flagged or surrogates else None)


def without_lone_surrogates(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD, so it always encodes as UTF-8.

    A file never holds one (``loads`` refuses it), but a pasted name or an imported
    record can; saving must not fail on it, and the file must reopen."""
    return _LONE_SURROGATE.sub("\ufffd", text)


class ConfigFileError(ValueError):
    """An imported config (not a plan) refused with the loader's limits: one sentence
    naming the file and, where there is one, the key."""


def loads_config(text: str, name: str = "", depth: int = MAX_DEPTH) -> Any:
    """Parse an imported JSON config with the plan loader's limits (nesting, number
    length, NaN / Infinity, duplicate keys, half characters), naming ``name`` (or
    nothing: the caller names the file).

    ``depth`` is lower than :data:`MAX_DEPTH` for a config a plan keeps inside itself
    (``model.hf_config``), so that the saved plan is still within the loader's depth."""
    if max_depth(text) > depth:
        raise ConfigFileError(
            f"{name or 'it'} nests more than {depth} levels deep; no config MemPlan reads does"
        )
    try:
        doc, problem = _parsed(text)
    except json.JSONDecodeError as exc:
        raise ConfigFileError(
            f"{name or 'it'} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    if problem:
        raise ConfigFileError(f"{name}: {problem}" if name else problem)
    return doc


_MAX_INT = 10**MAX_NUMBER_CHARS


def check_tree(tree: Any, name: str = "", depth: int = MAX_DEPTH) -> None:
    """Refuse a parsed config (TOML, YAML, a recipe's literals) holding what a plan
    cannot: nesting deeper than ``depth``, a number over :data:`MAX_NUMBER_CHARS`
    digits, NaN or an infinity. Iterative, so no nesting can exhaust the stack."""
    lead = f"{name}: " if name else ""
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), tree)]
    while stack:
        path, node = stack.pop()
        where = field_path(path) or "the top level"
        if len(path) > depth:
            raise ConfigFileError(f"{lead}{where} nests more than {depth} levels deep")
        if isinstance(node, bool):
            continue
        if isinstance(node, int) and not -_MAX_INT < node < _MAX_INT:
            raise ConfigFileError(f"{lead}{where} holds a number over {MAX_NUMBER_CHARS} digits")
        if isinstance(node, float) and not math.isfinite(node):
            raise ConfigFileError(f"{lead}{where} = {node} is not a finite number")
        if isinstance(node, dict):
            stack.extend(((*path, str(k)), v) for k, v in node.items())
        elif isinstance(node, list | tuple):
            stack.extend(((*path, i), v) for i, v in enumerate(node))
