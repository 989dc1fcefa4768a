"""Megatron-LM's ``--moe-layer-freq``: an int N, or a Python list expression, read
without ``eval``.

Megatron's ``moe_freq_type`` (``megatron/training/arguments.py``) takes an int N — one
expert layer every N layers, layer ``i`` MoE when ``i % N == 0`` (the pattern
``get_gpt_decoder_block_spec`` builds in ``megatron/core/models/gpt/gpt_layer_specs.py``)
— or a string holding a list expression such as ``([0]*3+[1]*58)``, ``([1]*3+[0]*2)*2``
or ``[0,0,1,1]``, one 0/1 per layer, which it evaluates. Here a tiny recursive-descent
evaluator accepts exactly that language: integer literals, list literals, parentheses,
``*`` by an integer and ``+`` of lists. Lengths are checked before a list is built and
lists are extended in place, so 10,000 layers cost linear time and no input can build a
huge list or recurse deeply.
"""

from __future__ import annotations

import re

MAX_LAYERS = 100_000
"""The longest pattern accepted (no model has a tenth of this many layers)."""

MAX_NESTING = 32
"""Parentheses / brackets nested deeper than this are refused (no pattern needs 3)."""

_TOKEN = re.compile(r"\s*(?:(\d{1,9})|([\[\](),*+]))")

Value = int | list[int]


class PatternError(ValueError):
    """A ``--moe-layer-freq`` that is not a list expression Megatron accepts."""


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens: list[str] = []
        pos = 0
        text = text.strip()
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None or m.end() == pos:
                raise PatternError(f"unexpected {text[pos : pos + 10]!r} at character {pos + 1}")
            self.tokens.append(m.group(1) or m.group(2))
            pos = m.end()
            while pos < len(text) and text[pos].isspace():
                pos += 1
        self.at = 0
        self.depth = 0

    def peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self, want: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (want is not None and tok != want):
            raise PatternError(f"expected {want or 'more'} at token {self.at + 1}")
        self.at += 1
        return tok

    def expr(self) -> Value:
        acc = self.term()
        while self.peek() == "+":
            self.take()
            right = self.term()
            if not isinstance(acc, list) or not isinstance(right, list):
                raise PatternError("'+' joins two lists")
            if len(acc) + len(right) > MAX_LAYERS:
                raise PatternError(f"the pattern is longer than {MAX_LAYERS:,} layers")
            acc.extend(right)
        return acc

    def term(self) -> Value:
        acc = self.atom()
        while self.peek() == "*":
            self.take()
            right = self.atom()
            if isinstance(acc, list) and isinstance(right, int):
                items, times = acc, right
            elif isinstance(acc, int) and isinstance(right, list):
                items, times = right, acc
            else:
                raise PatternError("'*' repeats a list by an integer")
            if len(items) * times > MAX_LAYERS:
                raise PatternError(f"the pattern is longer than {MAX_LAYERS:,} layers")
            acc = items * times
        return acc

    def atom(self) -> Value:
        tok = self.take()
        if tok.isdigit():
            return int(tok)
        if tok not in "([":
            raise PatternError(f"unexpected {tok!r} at token {self.at}")
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise PatternError(f"nested more than {MAX_NESTING} deep")
        if tok == "(":
            value = self.expr()
            self.take(")")
        else:
            value = self.items()
        self.depth -= 1
        return value

    def items(self) -> list[int]:
        out: list[int] = []
        while self.peek() != "]":
            item = self.expr()
            if not isinstance(item, int) or item not in (0, 1):
                raise PatternError("a list item must be 0 (dense) or 1 (MoE)")
            out.append(item)
            if len(out) > MAX_LAYERS:
                raise PatternError(f"the pattern is longer than {MAX_LAYERS:,} layers")
            if self.peek() == ",":
                self.take()
            elif self.peek() != "]":
                raise PatternError(f"expected ',' or ']' at token {self.at + 1}")
        self.take("]")
        return out


def moe_pattern(raw: str | int, layers: int) -> list[int]:
    """One 0/1 per layer (1 = MoE) of a ``--moe-layer-freq`` value, as Megatron builds it."""
    if isinstance(raw, int) or str(raw).strip().isdigit():
        n = int(raw)
        if n < 1:
            raise PatternError(f"{n} is not a layer frequency (1 or more)")
        return [1 if i % n == 0 else 0 for i in range(layers)]
    text = str(raw).strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]
    if "[" not in text:
        raise PatternError("neither an integer nor a list expression")
    parser = _Parser(text)
    value = parser.expr()
    if parser.peek() is not None:
        raise PatternError(f"unexpected {parser.peek()!r} after the expression")
    if not isinstance(value, list):
        raise PatternError("the expression is not a list")
    return value


def dense_and_step(pattern: list[int]) -> tuple[int, int] | None:
    """(first_dense_layers, layer_step) whose MoE layers — ``i >= dense`` and
    ``(i + 1) % step == 0`` (:class:`MoESpec`) — are exactly the pattern's 1s, or None
    when no such pair exists. Linear in the pattern's length."""
    moe = [i for i, v in enumerate(pattern) if v]
    if not moe:
        return len(pattern), 1
    step = moe[1] - moe[0] if len(moe) > 1 else moe[0] + 1
    if (moe[0] + 1) % step:
        return None
    expected = range(moe[0], len(pattern), step)
    if len(expected) != len(moe) or any(a != b for a, b in zip(expected, moe, strict=True)):
        return None
    return (moe[0] - step + 1 if moe[0] >= step else 0), step
