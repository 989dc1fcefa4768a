"""Garbage collection that never stops the window for a full collection of its heap.

A full (generation-2) collection scans every object the process holds that is not
frozen: Qt's wrappers, the modules, and the engine's caches, which fill with each model
estimated (tensor inventories, per-model memos, the analyses the window keeps). It
runs in whichever thread allocates at the wrong moment, holding the GIL, so the GUI
thread stops for as long as it takes, and that grows with the session: a long session
of many models reaches one, and it is far above a frame. ``tests/bench_gui.py`` prints
the figures ("cyclic collector", "long session"): run it with and without this policy.

So the window (a) freezes what exists when it starts, and again when a model's tensor
inventory has just been built (a new architecture estimated), into the permanent
generation, which collections skip, and (b) runs full collections a hundred times less
often (:data:`GEN2_THRESHOLD`); the young generations, where short-lived garbage dies,
keep their defaults. Cyclic garbage caught by a freeze is never collected: a bounded
cost, since freezes are rare (one per model) and the engine's results are acyclic
dataclasses and tuples.
"""

from __future__ import annotations

import gc

GEN2_THRESHOLD = 1000
"""Generation-1 collections between full collections (CPython's default is 10)."""


def install() -> None:
    """The policy for the process (idempotent)."""
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, GEN2_THRESHOLD)
    gc.freeze()


def settle() -> None:
    """After a burst of long-lived objects: collect the young generations (cheap) and
    freeze what survived, so later collections do not scan it again."""
    gc.collect(1)
    gc.freeze()
