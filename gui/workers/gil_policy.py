"""A short GIL switch interval, so the GUI thread gets the interpreter back at once.

Work a user starts by hand runs on a pool thread of the window's process
(:class:`gui.workers.workers.TaskRunner`: a comparison with its GPU-count searches, a
sweep, a report's gathering, a framework export check), because its result is wanted
here. Such a thread holds the GIL while it computes; the GUI thread releases it at every
call into Qt and then waits up to one switch interval to get it back — CPython's 5 ms,
paid again at each of the many Qt calls a redraw makes. At :data:`SWITCH_INTERVAL_S` the
wait is a tenth of that; the cost is more frequent switching in the background thread.

What it keeps away is printed by ``tests/bench_gui.py`` ("edit → chart painted during a
thread's search"): run it with and without this policy to see the event-loop gap move.
The window's own analysis after each edit needs no such help: it runs in a child process
(:mod:`gui.workers.analysis_worker`).
"""

from __future__ import annotations

import sys

SWITCH_INTERVAL_S = 0.0005
"""How long a thread may hold the GIL while another waits for it (CPython: 0.005)."""


def install() -> None:
    """The policy for the process (idempotent)."""
    sys.setswitchinterval(SWITCH_INTERVAL_S)
