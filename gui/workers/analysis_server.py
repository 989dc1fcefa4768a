"""The analysis worker process: computes the slow parts of plans the window sends it.

A process, not a thread: the GPU-count search and the what-if questions are pure Python
and hold the GIL for seconds (tens of seconds for DeepSeek-V3), and a GUI thread that
shares an interpreter with them waits for the GIL at every call into Qt — the window
froze for half a second after an edit. In its own process the search costs the window
nothing, and a search for a plan the user has already left is stopped by killing it.

The protocol is length-prefixed pickles over stdin/stdout (the parent is the window of
the same installation, so pickle is trusted, and it carries the engine's own result
types whole). The server says ``("ready", pid)`` once, then reads jobs
``(job id, plan, part names)`` and answers ``(job id, config hash, part, value)`` per
part and ``(job id, config hash, None, None)`` when the job is done. Before each part it
looks whether a newer job is waiting and, if so, abandons the current one (the parent
no longer wants it). End of stdin ends the server: it never outlives the window.

Idle work: ``("totals", preset keys)`` asks for each preset's exact parameter count (its
whole tensor inventory is built: 0.9 s of CPU for the catalogue, which in the window's
own process competed with the GUI thread for the GIL). They are answered
``("total", key, count)`` one at a time while no job waits; a request never abandons
a job.

Run as ``python -m gui.workers.analysis_server``; it imports the engine only (no Qt).
"""

from __future__ import annotations

import os
import pickle
import select
import struct
import sys
from collections import deque
from collections.abc import Callable
from typing import BinaryIO, cast

from engine.analysis import Part, analysis
from engine.errors import PlanError
from engine.models.presets import exact_total
from engine.plan import Plan

NICENESS = 10
"""How much lower than the window's the server's CPU priority is (POSIX): on a machine
with few cores the window's redraws come before a search's next plan."""

HEADER = struct.Struct("!Q")
"""Each frame's length, before its pickle."""

Compute = Callable[[Plan, Part], object]
"""(plan, part name) → the part's value, or the PlanError that says why there is none."""

Count = Callable[[str], int]
"""Preset key → its exact parameter count."""

TOTALS = "totals"
"""The first item of an idle-work request (see the module doc)."""


def encode(message: object) -> bytes:
    """One frame: the pickle's length, then the pickle."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(data)) + data


def decode(buffer: bytearray) -> list[object]:
    """Every whole frame at the start of ``buffer`` (removed from it); a partial frame
    stays for the next read."""
    out: list[object] = []
    while len(buffer) >= HEADER.size:
        (size,) = HEADER.unpack_from(buffer)
        end = HEADER.size + size
        if len(buffer) < end:
            break
        out.append(pickle.loads(bytes(buffer[HEADER.size : end])))
        del buffer[:end]
    return out


def _read_exact(inp: BinaryIO, size: int) -> bytes | None:
    """``size`` bytes from an unbuffered stream, None at its end."""
    data = bytearray()
    while len(data) < size:
        chunk = inp.read(size - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def read_message(inp: BinaryIO) -> object | None:
    """The next message from the parent (None when it closed the pipe)."""
    head = _read_exact(inp, HEADER.size)
    if head is None:
        return None
    (size,) = HEADER.unpack(head)
    body = _read_exact(inp, size)
    return None if body is None else pickle.loads(body)


def _waiting(inp: BinaryIO) -> bool:
    """Whether the parent has sent something more (a newer job, or closed the pipe)."""
    try:
        ready, _, _ = select.select([inp], [], [], 0)
    except (OSError, ValueError):  # no select on this kind of pipe: finish the job
        return False
    return bool(ready)


def compute_part(plan: Plan, name: Part) -> object:
    """The part from the plan's shared analysis (so later parts reuse its estimate)."""
    try:
        return analysis(plan).get(name)
    except PlanError as exc:
        return exc


class Inbox:
    """The parent's messages sorted as they are read: jobs in order, preset-total
    requests set aside as idle work, and whether the parent has closed the pipe."""

    def __init__(self, inp: BinaryIO) -> None:
        self.inp = inp
        self.jobs: deque[tuple[int, Plan, tuple[Part, ...]]] = deque()
        self.totals: deque[str] = deque()
        self.closed = False

    def read(self) -> None:
        """Wait for one message and sort it."""
        message = read_message(self.inp)
        if message is None:
            self.closed = True
        elif isinstance(message, tuple) and message[0] == TOTALS:
            self.totals.extend(cast(tuple[str, ...], message[1]))
        else:
            self.jobs.append(cast(tuple[int, Plan, tuple[Part, ...]], message))

    def job_waiting(self) -> bool:
        """Whether a job (or the end of input) waits, reading whatever has arrived."""
        while not self.closed and _waiting(self.inp):
            self.read()
        return self.closed or bool(self.jobs)


def serve(
    inp: BinaryIO, out: BinaryIO, compute: Compute = compute_part, count: Count = exact_total
) -> int:
    """Answer jobs until the parent closes ``inp``, and preset totals while no job
    waits; ``inp`` must be unbuffered (a buffered reader would hide a waiting job from
    :func:`_waiting`)."""

    def send(message: object) -> None:
        out.write(encode(message))
        out.flush()

    send(("ready", os.getpid()))
    inbox = Inbox(inp)
    while True:
        if inbox.job_waiting():
            if inbox.closed:
                return 0
            job, plan, parts = inbox.jobs.popleft()
            key = plan.config_hash()
            for name in parts:
                if inbox.job_waiting():
                    break
                send((job, key, name, compute(plan, name)))
            send((job, key, None, None))
        elif inbox.totals:
            preset = inbox.totals.popleft()
            send(("total", preset, count(preset)))
        else:
            inbox.read()


def main(compute: Compute = compute_part) -> int:
    """Serve on this process's stdin/stdout; stray prints go to stderr, not the pipe."""
    out = sys.stdout.buffer
    sys.stdout = sys.stderr
    if hasattr(os, "nice"):
        os.nice(NICENESS)
    raw = cast(BinaryIO, getattr(sys.stdin.buffer, "raw", sys.stdin.buffer))
    return serve(raw, out, compute)


if __name__ == "__main__":
    raise SystemExit(main())
