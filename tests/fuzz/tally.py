"""What a fuzz run counts: cases, outcomes, crashes, lost plans, the longest message."""

from __future__ import annotations

import faulthandler
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from engine.errors import MAX_MESSAGE_CHARS

HANG_S = 30.0
"""A case slower than this counts as a hang in the long run's report (never asserted)."""

WATCHDOG_S: list[float] = []
"""Set by the long run: a case still running after this many seconds dumps every
thread's stack and ends the process (a real hang must not pass for a slow case)."""


@dataclass
class Tally:
    """The result of one runner: a test asserts ``ok``; the long script prints it."""

    name: str
    cases: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    crashes: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    long_messages: list[str] = field(default_factory=list)
    longest_message: str = ""
    slowest_s: float = 0.0
    slowest_case: str = ""
    hangs: int = 0

    def message(self, text: str, outcome: str) -> None:
        """A refusal the user would read: counted, and kept when it is the longest."""
        self.outcomes[outcome] += 1
        if len(text) > len(self.longest_message):
            self.longest_message = text
        if len(text) > MAX_MESSAGE_CHARS:
            self.long_messages.append(text[:400])

    def crash(self, case: str, exc: BaseException) -> None:
        frames = traceback.format_exception(exc)
        self.crashes.append(f"{case}: {type(exc).__name__}: {exc!s:.300}\n{''.join(frames[-3:])}")

    def lose(self, case: str, what: str) -> None:
        self.lost.append(f"{case}: {what}")

    @contextmanager
    def case(self, label: str) -> Iterator[None]:
        """Time one case (for the long run's hang count and slowest case)."""
        start = time.perf_counter()
        if WATCHDOG_S:
            faulthandler.dump_traceback_later(WATCHDOG_S[0], exit=True)
        try:
            yield
        finally:
            if WATCHDOG_S:
                faulthandler.cancel_dump_traceback_later()
            self.cases += 1
            spent = time.perf_counter() - start
            if spent > self.slowest_s:
                self.slowest_s, self.slowest_case = spent, label
            self.hangs += spent > HANG_S

    def merge(self, other: Tally) -> None:
        """Add another run's counts to this one."""
        self.cases += other.cases
        self.outcomes.update(other.outcomes)
        self.crashes += other.crashes
        self.lost += other.lost
        self.long_messages += other.long_messages
        self.hangs += other.hangs
        if len(other.longest_message) > len(self.longest_message):
            self.longest_message = other.longest_message
        if other.slowest_s > self.slowest_s:
            self.slowest_s, self.slowest_case = other.slowest_s, other.slowest_case

    @property
    def ok(self) -> bool:
        return not (self.crashes or self.lost or self.long_messages)

    def problems(self) -> str:
        """What a failing test prints: the first few of each kind."""
        parts = [*self.crashes[:3], *self.lost[:3], *self.long_messages[:3]]
        return f"{self.name}: {self.summary()}\n" + "\n---\n".join(parts)

    def summary(self) -> str:
        top = ", ".join(f"{k} {v}" for k, v in self.outcomes.most_common(6))
        return (
            f"{self.cases} cases ({top}); crashes {len(self.crashes)}, lost {len(self.lost)}, "
            f"hangs {self.hangs}, messages over {MAX_MESSAGE_CHARS} chars "
            f"{len(self.long_messages)}, longest message {len(self.longest_message)} chars, "
            f"slowest case {self.slowest_s:.2f} s ({self.slowest_case:.160})"
        )
