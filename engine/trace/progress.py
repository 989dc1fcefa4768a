"""A trace's progress lines: written by ``memplan trace`` on stderr, read by the window.

The window runs the trace in a separate process (killing a process is the only sure way
to stop a torch run), so progress crosses as text: ``[  12.3 s] step 1 of 2``. This
module owns both ends of that line — its format and the milestones the runner reports
(build, shard, materialise, each step, done) — so the progress bar and the terminal
can never disagree on what a line means.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MILESTONES: tuple[str, ...] = ("build", "shard", "materialise")
"""The runner's steps before the training steps, in order (their messages' first word)."""

_LINE = re.compile(r"^\[\s*(?P<elapsed>\d+(?:\.\d+)?) s\] (?P<message>.*)$")
_STEP = re.compile(r"^step (?P<k>\d+) of (?P<n>\d+)\b")


def format_line(elapsed: float, message: str) -> str:
    """The stderr line for one progress message, with the seconds since the start."""
    return f"[{elapsed:6.1f} s] {message}"


def step_message(step: int, steps: int) -> str:
    """The message of training step ``step`` (1-based) of ``steps``."""
    return f"step {step} of {steps}"


@dataclass(frozen=True, slots=True)
class ProgressLine:
    """One parsed line: elapsed seconds, the message, and the milestones done of the
    total. A message announces the start of its milestone, so it counts those before
    it; ``done`` completes the total (``len(MILESTONES)`` + the steps)."""

    elapsed: float
    message: str
    done: int
    total: int

    @property
    def finished(self) -> bool:
        return self.done == self.total


def total_milestones(steps: int) -> int:
    return len(MILESTONES) + steps


def parse_line(line: str, steps: int) -> ProgressLine | None:
    """A progress line of a trace of ``steps`` steps, or None for any other stderr text
    (a library warning, the final error)."""
    match = _LINE.match(line.strip())
    if match is None:
        return None
    message = match["message"]
    total = total_milestones(steps)
    word = message.split(":", 1)[0].split(" ", 1)[0]
    if word in MILESTONES:
        done = MILESTONES.index(word)
    elif (step := _STEP.match(message)) is not None:
        done = len(MILESTONES) + int(step["k"]) - 1
    elif word == "done":
        done = total
    else:
        done = 0
    return ProgressLine(float(match["elapsed"]), message, min(done, total), total)
