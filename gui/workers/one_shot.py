"""How a one-shot command-line process (``memplan report``) starts and ends.

``memplan report`` computes one plan's analysis, writes one PDF and exits. Two costs of a
long-lived interpreter buy such a process nothing (measured on the default plan, 2 cores,
of a run of about a second):

* **the cyclic garbage collector**: ~60 ms of collections, a third of them during the
  imports (class and function objects are container objects; a full collection ran once,
  over ~470 modules). :func:`collector_paused` switches it off for the command. It is
  safe because reference counting still frees every acyclic object the moment it is
  dropped — the engine's results are frozen dataclasses and tuples, Qt's objects are
  owned by their Python wrappers — so only reference cycles wait, and they wait only
  until the process ends a moment later. The report of the largest preset, DeepSeek-V3,
  peaks at ~200 MB resident with the collector and without it (and takes 20 s instead of
  30: collections rescanning its ~45,000 cached tensors were the difference). In process
  (a test calling ``main([...])``) the collector is switched back on after the command.
* **the interpreter's teardown**: 0.13–0.2 s after the command has returned, destroying
  every module, the Qt application, its font engines and the text documents one by one,
  and a last full collection. :func:`end_process` leaves without it once the streams are
  flushed: the PDF is already closed and checked (``gui.report.cli``), nothing registers
  an exit handler (no ``atexit`` in engine/ or gui/), so skipping the teardown changes
  nothing but the time. Only the process's own entry point (``main()`` reading
  ``sys.argv``) ends this way, never a call that passed its own arguments.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import NoReturn

COMMANDS = frozenset({"report"})
"""Subcommands run as one-shot processes. The engine's commands keep the collector: a
``sweep`` or ``layouts`` search over a large model runs longer and allocates far more."""


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic collector off for the block, back to its former state after it."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def end_process(code: int) -> NoReturn:
    """Flush the standard streams and end the process with ``code``, skipping the
    interpreter's teardown (see the module docstring for why nothing is lost)."""
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError, ValueError):  # a closed pipe or stream: nothing to say there
            stream.flush()
    os._exit(code)
