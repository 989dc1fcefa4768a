"""Mutated import files: the plan-file mutations (``tests.fuzz.mutate``) plus what a
framework config holds that a plan never does — ``${TP}``, ``$NLAYERS``, ``2*4``,
``auto``, zeros, negative sizes, ``inf`` / ``nan``, a section of the wrong type, deep
nesting, Megatron list expressions good and bad — and, for a model folder, a damaged
safetensors header (length prefix, shapes of thousands of dimensions, offsets).
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

from tests.fuzz.mutate import HOSTILE_TOKENS, HOSTILE_VALUES, ODD_CHARS

GUESSES: tuple[Any, ...] = (
    "${TP}",
    "$NLAYERS",
    "$((4*2))",
    "2*4",
    "auto",
    "none",
    0,
    -1,
    -(10**40),
    "0",
    "-3",
    "1e999",
    "inf",
    "nan",
    1.5,
    10**150,
    "9" * 120,
    "[1]",
    "{}",
)
"""Values a user writes where a size belongs, or a corrupted file leaves there."""

SECTIONS: tuple[Any, ...] = ([], [1, 2], "x", 3, None, True, {"a": {"b": {"c": []}}})
"""What a whole section may be replaced with (a list where a table belongs, …)."""

MOE_FREQ: tuple[str, ...] = (
    "1",
    "2",
    "0",
    "-1",
    '"([0]*3+[1]*58)"',
    "[0]*3+[1]*58",
    "([0,1]*24)",
    "([0]+[1]*26)",
    "[0,0,1,1]",
    "([1]*3+[0]*2)*2",
    "[1]*999999999",
    "(" * 200 + "[1]" + ")" * 200,
    "[" + ",".join(["1"] * 10_000) + "]",
    "+".join(["[1]"] * 5000),
    "[2,3]",
    "__import__('os')",
    "[0]*${N_DENSE}+[1]*$N_MOE",
)
"""``--moe-layer-freq`` values: Megatron's documented forms, and hostile ones."""

BLOAT = 0.01
"""The share of files grown to about the 1 MiB cap (each costs a second or two)."""

_NUMBER = re.compile(r"(?<![\w.$])-?\d+(?:\.\d+)?(?![\w.])")


def _text_mutation(rng: random.Random, text: str) -> str:
    """What a disk or an editor does: truncation, a lost or repeated span or line, a
    hostile token or an odd character inserted."""
    n = len(text)
    at = rng.randrange(n + 1)
    kind = rng.randrange(6)
    if kind == 0:
        return text[: rng.randrange(n + 1)]
    if kind == 1:
        return text[:at] + text[min(n, at + rng.randint(1, 40)) :]
    if kind == 2:
        return text[:at] + rng.choice(HOSTILE_TOKENS) + text[at:]
    if kind == 3:
        start = rng.randrange(n + 1)
        return text[:at] + text[start : start + rng.randint(1, 200)] + text[at:]
    if kind == 4:
        lines = text.split("\n")
        i = rng.randrange(len(lines))
        return "\n".join([*lines[: i + 1], lines[i], *lines[i + 1 :]])
    return text[:at] + chr(rng.choice(ODD_CHARS)) + text[at:]


def _byte_mutation(rng: random.Random, data: bytes) -> bytes:
    """One to four bytes overwritten, sometimes a byte-order mark in front."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if out:
            out[rng.randrange(len(out))] = rng.randrange(256)
    if rng.random() < 0.2:
        out[:0] = b"\xef\xbb\xbf"
    return bytes(out)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    items: Any = node.items() if isinstance(node, dict) else enumerate(node)
    for key, value in items:
        out.append((*prefix, key))
        if isinstance(value, dict | list):
            out += _paths(value, (*prefix, key))
    return out


def _tree_mutation(rng: random.Random, doc: Any) -> None:
    paths = _paths(doc)
    if not paths:
        return
    path = rng.choice(paths)
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    kind = rng.randrange(6)
    if kind == 0:
        del parent[path[-1]]
    elif kind == 1:
        parent[path[-1]] = rng.choice(HOSTILE_VALUES)
    elif kind == 2 and isinstance(parent[path[-1]], dict):
        parent[path[-1]] = rng.choice(SECTIONS)
    elif kind == 3 and isinstance(parent, dict):
        parent[rng.choice(["x", "k" * 500, "\u202e", "a\nb", "\x1b[31m"])] = rng.choice(GUESSES)
    else:
        parent[path[-1]] = rng.choice(GUESSES)


def mutate_json(rng: random.Random, text: str) -> bytes:
    """A JSON config mutated as a tree (values, sections, keys) or as text / bytes."""
    family = rng.random()
    if family < 0.55:
        try:
            doc = json.loads(text)
        except ValueError:
            doc = None
        if isinstance(doc, dict | list):
            for _ in range(rng.randint(1, 3)):
                _tree_mutation(rng, doc)
            if isinstance(doc, dict) and rng.random() < BLOAT:  # near the 1 MiB cap
                doc["x_pad"] = [rng.choice([0, 0.5, "ab", [], {}])] * rng.randint(2**17, 2**19)
            dumped = json.dumps(doc, indent=rng.choice([None, 2]), ensure_ascii=rng.random() < 0.5)
            return dumped.encode("utf-8", "surrogatepass")
    if family < 0.9:
        for _ in range(rng.randint(1, 3)):
            text = _text_mutation(rng, text)
        return text.encode("utf-8", "surrogatepass")
    return _byte_mutation(rng, text.encode("utf-8"))


def _token_mutation(rng: random.Random, text: str) -> str:
    """A number of the file replaced by a guess, or a line's value by a hostile token."""
    numbers = list(_NUMBER.finditer(text))
    kind = rng.randrange(4)
    if numbers and kind < 2:
        m = rng.choice(numbers)
        return text[: m.start()] + str(rng.choice(GUESSES)) + text[m.end() :]
    if kind == 2 and "--" in text:
        value = rng.choice(MOE_FREQ)
        at = text.find("--moe-layer-freq")
        if at >= 0:
            end = text.find(" ", text.find(" ", at) + 1)
            return text[:at] + f"--moe-layer-freq {value}" + (text[end:] if end > 0 else "")
        return text.rstrip("\n") + f" --num-experts 8 --moe-layer-freq {value}\n"
    lines = text.split("\n")
    i = rng.randrange(len(lines))
    lines[i] = lines[i] + " " + rng.choice([*HOSTILE_TOKENS[:6], "[[[[", "'''", '"""', "\\"])
    return "\n".join(lines)


def _bloat(rng: random.Random, text: str) -> str:
    """One line repeated until the file is about the 1 MiB cap (under or over it)."""
    lines = text.split("\n")
    line = rng.choice(lines) or "x"
    times = int(2**20 * rng.uniform(0.5, 1.05)) // (len(line) + 1)
    return text + "\n" + "\n".join([line] * times) + "\n"


def mutate_text(rng: random.Random, text: str) -> bytes:
    """A YAML / TOML / recipe / script mutated by tokens, as text, or as bytes."""
    if rng.random() < BLOAT:
        text = _bloat(rng, text)
    family = rng.random()
    if family < 0.55:
        for _ in range(rng.randint(1, 3)):
            text = _token_mutation(rng, text)
        return text.encode("utf-8", "surrogatepass")
    if family < 0.9:
        for _ in range(rng.randint(1, 3)):
            text = _text_mutation(rng, text)
        return text.encode("utf-8", "surrogatepass")
    return _byte_mutation(rng, text.encode("utf-8"))


def mutate_header(rng: random.Random, header: str) -> tuple[bytes, int | None]:
    """A safetensors header (bytes, and a length prefix to write instead of its own)."""
    kind = rng.randrange(5)
    if kind == 0:
        doc = json.loads(header)
        name = rng.choice([k for k in doc if k != "__metadata__"])
        doc[name]["shape"] = rng.choice(
            [[2**40] * rng.choice([65, 5000, 50_000]), [-1], [2**70], ["x"], [0], 7]
        )
        return json.dumps(doc).encode(), None
    if kind == 1:
        raw = header.encode()
        return raw, rng.choice([0, 7, len(raw) + 1, 2**40, 2**63, len(raw) - 1])
    return mutate_json(rng, header), None
