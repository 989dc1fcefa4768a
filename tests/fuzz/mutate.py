"""Mutated ``.memplan`` files: from a flipped byte to a 5,000-digit number.

Half the mutations work on the JSON tree (a field set to a plausible value, to a hostile
one, removed, renamed, duplicated), so many cases get past the parser and reach the
plan's validation and the estimate; the other half damage the text or bytes (truncation,
garbage, deep nesting, a BOM, half a character), which is what a disk, an editor or an
unkind user does.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

from engine.plan import Plan
from tests.fuzz.plans import leaves, random_value

HOSTILE_VALUES: tuple[Any, ...] = (
    -1,
    0,
    1,
    -(2**63),
    2**63,
    10**30,
    1e308,
    -1e-308,
    0.5,
    "",
    "x" * 100_000,
    None,
    True,
    [],
    {},
    [1, 2, 3],
    {"a": 1},
    "\u202e\u2066reversed",
    "🙂" * 50,
)

HOSTILE_TOKENS: tuple[str, ...] = (
    "[" * 1000,
    '{"a":' * 990,
    "9" * 5000,
    "-0." + "1" * 500,
    "1e999",
    "NaN",
    "-Infinity",
    '"\\ud83d"',
    '"\\udc00x"',
    '"\\u0000"',
    "\ufeff",
    '"' + "x" * 1_000_000 + '"',
    "\u202e",
    "null",
    "}",
    "]]]]",
    ",,",
    '"a": 1, "a": 2',
)

Doc = dict[str, Any]


def _leaf_paths(doc: Doc, prefix: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    out: list[tuple[str | int, ...]] = []
    items: Any = doc.items() if isinstance(doc, dict) else enumerate(doc)
    for key, value in items:
        path = (*prefix, key)
        out.append(path)
        if isinstance(value, (dict, list)):
            out += _leaf_paths(value, path)  # type: ignore[arg-type]
    return out


def _parent(doc: Doc, path: tuple[str | int, ...]) -> Any:
    node: Any = doc
    for key in path[:-1]:
        node = node[key]
    return node


def _set_plausible(rng: random.Random, doc: Doc, plan: Plan | None) -> None:
    node = doc.get("plan")
    if plan is None or not isinstance(node, dict):
        return
    path, annotation, meta = rng.choice(leaves(plan))
    *parents, last = path.split(".")
    for key in parents:
        if not isinstance(node.get(key), dict):
            return
        node = node[key]
    node[last] = random_value(rng, annotation, meta)


def _set_hostile(rng: random.Random, doc: Doc, _plan: Plan | None) -> None:
    paths = _leaf_paths(doc)
    if paths:
        path = rng.choice(paths)
        _parent(doc, path)[path[-1]] = rng.choice(HOSTILE_VALUES)


def _delete(rng: random.Random, doc: Doc, _plan: Plan | None) -> None:
    paths = _leaf_paths(doc)
    if paths:
        path = rng.choice(paths)
        del _parent(doc, path)[path[-1]]


def _add_unknown(rng: random.Random, doc: Doc, _plan: Plan | None) -> None:
    paths = [p for p in _leaf_paths(doc) if isinstance(_parent(doc, p), dict)]
    if paths:
        path = rng.choice(paths)
        _parent(doc, path)[rng.choice(["x", "k" * 5000, "\u202e", "seq_len "])] = 1


Tree = Callable[[random.Random, Doc, "Plan | None"], None]
TREE_MUTATIONS: tuple[Tree, ...] = (
    _set_plausible,
    _set_plausible,
    _set_plausible,
    _set_hostile,
    _delete,
    _add_unknown,
)
ODD_CHARS = (0x22, 0x5C, 0x7B, 0x5B, 0x2C, 0x3A, 0xD7FF, 0x202E)


def _text_mutation(rng: random.Random, text: str) -> str:
    n = len(text)
    at = rng.randrange(n + 1)
    kind = rng.randrange(6)
    if kind == 0:
        return text[: rng.randrange(n + 1)]  # truncated
    if kind == 1:
        end = min(n, at + rng.randint(1, 40))
        return text[:at] + text[end:]  # a span lost
    if kind == 2:
        return text[:at] + rng.choice(HOSTILE_TOKENS) + text[at:]
    if kind == 3:
        start = rng.randrange(n + 1)
        return text[:at] + text[start : start + rng.randint(1, 200)] + text[at:]  # duplicated
    if kind == 4:
        lines = text.split("\n")  # a repeated line: usually a duplicate key
        i = rng.randrange(len(lines))
        return "\n".join([*lines[: i + 1], lines[i], *lines[i + 1 :]])
    return text[:at] + chr(rng.choice(ODD_CHARS)) + text[at:]


def _byte_mutation(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if not out:
            break
        out[rng.randrange(len(out))] = rng.randrange(256)
    if rng.random() < 0.2:
        out[:0] = b"\xef\xbb\xbf"
    return bytes(out)


def mutate(rng: random.Random, text: str, plan: Plan | None) -> bytes:
    """One mutated file (1–3 mutations of one kind family) from a seed file's text."""
    family = rng.random()
    if family < 0.5:
        try:
            doc = json.loads(text)
        except ValueError:
            doc = None
        if isinstance(doc, dict) and isinstance(doc.get("plan"), dict):
            for _ in range(rng.randint(1, 3)):
                rng.choice(TREE_MUTATIONS)(rng, doc, plan)
            text = json.dumps(doc, indent=rng.choice([None, 2]), ensure_ascii=rng.random() < 0.5)
            return text.encode("utf-8", "surrogatepass")
    if family < 0.85:
        for _ in range(rng.randint(1, 3)):
            text = _text_mutation(rng, text)
        return text.encode("utf-8", "surrogatepass")
    return _byte_mutation(rng, text.encode("utf-8"))
