"""One memo object per key the ledger shares work on, instead of one cache per function.

Several ledger functions are worked out once per shape-free plan (its node ledgers, its
communication, each stage's shared rows, its make-ups and size-free plans) or once per
placement (layer ranges, representative stages, placed tensors). Each had its own
``lru_cache`` keyed on the same object, so one lookup hashed that object again per
function and each cache evicted on its own. A :class:`Memo` holds all of one key's
values: the key object is looked up once (by the one cache that makes its memo), and
each value is built the first time it is asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TypeVar, cast

T = TypeVar("T")

_MISSING = object()

LIMIT = 1024
"""Values one memo keeps at most (it starts afresh past that)."""


class Memo:
    """Values worked out for one key object, each built on first use by
    :meth:`get` (the memo lives as long as the cache entry that holds it)."""

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
        return cast(T, got)
