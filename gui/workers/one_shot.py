"""How a one-shot command-line process (``memplan report``) starts and ends.

``memplan report`` computes one plan's analysis, writes one PDF and exits. The
interpreter's teardown buys such a process nothing: after the command has returned it
destroys every module, the Qt application, its font engines and the text documents one by
one, and runs a last full collection (``tests/bench_report.py`` times the command end to
end). :func:`end_process` leaves without it once the streams are flushed: the PDF is
already closed and checked (``gui.report.cli``), nothing registers an exit handler (no
``atexit`` in engine/ or gui/), so skipping the teardown changes nothing but the time.
Only the process's own entry point (``main()`` reading ``sys.argv``) ends this way, never
a call that passed its own arguments.

The cyclic collector is left on: switching it off for the command measured no gain in
its time or its peak memory, on the default plan or on the largest preset
(``tests/bench_gui.py``'s "memplan report" line times the command).
"""

from __future__ import annotations

import os
import sys
from contextlib import suppress
from typing import NoReturn

COMMANDS = frozenset({"report"})
"""Subcommands run as one-shot processes (ended by :func:`end_process`)."""


def end_process(code: int) -> NoReturn:
    """Flush the standard streams and end the process with ``code``, skipping the
    interpreter's teardown (see the module docstring for why nothing is lost)."""
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError, ValueError):  # a closed pipe or stream: nothing to say there
            stream.flush()
    os._exit(code)
