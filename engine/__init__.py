"""MemPlan's engine: a training plan in, a per-rank memory ledger out.

Pure Python with no Qt dependency, so the command line, the tests and the
layout search can run it anywhere; the GUI is just one more view of it.
"""

__version__ = "0.1.0"
