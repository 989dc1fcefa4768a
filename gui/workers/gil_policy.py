"""A short GIL switch interval, so the GUI thread gets the interpreter back at once.

Some background work still runs on threads of the window's process (building a large
model's tensor inventory before its first estimate, sweeps and comparisons), because
its result must live in this process's caches. Such a thread holds the GIL; the GUI
thread releases it at every call into Qt and then waits up to one switch interval to
get it back — CPython's 5 ms, paid again at each of the hundreds of Qt calls a redraw
makes, so a preset of DeepSeek-V3 froze the window for about 1.5 s. At
:data:`SWITCH_INTERVAL_S` the wait is a tenth of that; the cost is more frequent
switching in the background thread (a few per cent of its speed).
"""

from __future__ import annotations

import sys

SWITCH_INTERVAL_S = 0.0005
"""How long a thread may hold the GIL while another waits for it (CPython: 0.005)."""


def install() -> None:
    """The policy for the process (idempotent)."""
    sys.setswitchinterval(SWITCH_INTERVAL_S)
