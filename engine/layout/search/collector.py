"""The layout search runs with Python's cyclic garbage collector paused, and what it
leaves alive is then frozen.

A search builds hundreds of thousands of short-lived objects (plans, rows, held
tensors) while the engine's caches keep a few hundred thousand long-lived ones; each
generational collection the allocations trigger walks young objects, and the older
generations' collections walk the caches' objects again, none of which are garbage: a
large share of a big MoE search's time (``tests/bench_engine.py`` prints it).

Turning the collector back on is not the end of that cost: every object the paused
search allocated and kept (the caches' new entries) is still in the youngest generation,
and the first collection after the pause walks them all (the bench prints that too). So
the outermost pause ends with :func:`gc.freeze`: everything alive then moves to the
permanent generation, which collections skip (reference counting still frees each object
when its last reference goes, so the caches' evicted entries are freed as before).

What freezing would keep is garbage in reference cycles that is pending at that
moment. A search itself leaves none (``tests/engine/layout/test_collector.py`` checks
that a MoE search leaves no cyclic garbage: the collector finds nothing after it), and
the rest of the process's is bounded: every :data:`THAW_EVERY`-th pause ends with
:func:`gc.unfreeze` instead, handing everything back to the oldest generation, where
the next full collection frees any cycles left.

Process-wide by nature (CPython has one collector): the pause is counted, so nested
and concurrent searches (the GUI's worker threads) restore it only when the last one
ends, and only if it was enabled when the first began (a collector the caller turned
off is left off, and nothing is frozen).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

THAW_EVERY = 32
"""One outermost pause in this many ends by thawing instead of freezing."""

_lock = threading.Lock()
_depth = 0
_resume = False
_ends = 0


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic collector for the ``with`` block (see the module docstring)."""
    global _depth, _resume
    with _lock:
        if _depth == 0:
            _resume = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _resume:
                _settle()
                gc.enable()


def _settle() -> None:
    """Freeze what is alive as the last pause ends — or, one time in
    :data:`THAW_EVERY`, thaw everything frozen so far (called under the lock)."""
    global _ends
    _ends += 1
    if _ends % THAW_EVERY:
        gc.freeze()
    else:
        gc.unfreeze()
