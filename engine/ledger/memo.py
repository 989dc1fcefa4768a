"""One memo object per key the ledger shares work on, instead of one cache per function.

Much of the ledger is worked out once per shape-free plan (node ledgers, communication,
shared rows, make-ups) or once per placement (layer ranges, representatives, placed
tensors). One cache decorator per function hashed the same key object again for each and
evicted on its own; a :class:`Memo`, made by the one cache keyed on that object, holds
all of its values, each built the first time it is asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TypeVar

T = TypeVar("T")

_MISSING = object()

LIMIT = 1024  # values one memo keeps at most (it starts afresh past that)


class Memo:
    """Values worked out for one key object (as long as the cache entry holding it lives)."""

    __slots__ = ("got",)

    def __init__(self) -> None:
        self.got: dict[Hashable, object] = {}

    def get(self, key: Hashable, build: Callable[..., T], *args: object) -> T:
        """The value kept under ``key``, built as ``build(*args)`` the first time; the
        key names the function and its arguments (``build`` must depend on them only)."""
        got = self.got.get(key, _MISSING)
        if got is _MISSING:
            if len(self.got) >= LIMIT:  # keys with a sequence length can grow without end
                self.got.clear()
            got = self.got[key] = build(*args)
        return got  # type: ignore[return-value]  # built by build: a T
