"""A stand-in for ``gui.workers.analysis_server`` in the worker tests (run as a script).

It serves like the real one, except for two sequence lengths: :data:`HANG_SEQ_LEN`
computes for two minutes (a search the window must stop by killing the process) and
:data:`CRASH_SEQ_LEN` ends the process with exit code 3 and a line on stderr (a worker
that dies: the window must say so and keep working).
"""

from __future__ import annotations

import os
import sys
import time

from engine.analysis import Part
from engine.plan import Plan
from gui.workers.analysis_server import compute_part, main

HANG_SEQ_LEN = 1111
CRASH_SEQ_LEN = 2222
HANG_SECONDS = 120
HANGING = "fake analysis: hanging"
"""Said on stderr when the hang starts: a test waits for it before sending a newer job
(sent earlier, the server abandons the hanging job before it starts: nothing to kill)."""


def compute(plan: Plan, name: Part) -> object:
    if plan.batch.seq_len == HANG_SEQ_LEN:
        print(HANGING, file=sys.stderr, flush=True)
        time.sleep(HANG_SECONDS)
    if plan.batch.seq_len == CRASH_SEQ_LEN:
        print("fake analysis: crashed on purpose", file=sys.stderr, flush=True)
        os._exit(3)
    return compute_part(plan, name)


if __name__ == "__main__":
    raise SystemExit(main(compute))
