"""The wall-clock budget one GPU-count search runs within: extreme plans (thousands of
layers) stop at it and say how far they got instead of running for minutes."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

Clock = Callable[[], float]


class BudgetSpent(Exception):
    """The search's time budget ran out before the next estimate."""


@dataclass
class Budget:
    """A wall-clock budget for one search (``seconds`` None: unbounded)."""

    seconds: float | None
    clock: Clock = time.monotonic
    started: float = field(default=0.0)
    spent: bool = False

    def __post_init__(self) -> None:
        self.started = self.clock()

    def elapsed(self) -> float:
        return self.clock() - self.started

    def check(self) -> None:
        if self.seconds is not None and self.elapsed() > self.seconds:
            self.spent = True
            raise BudgetSpent
