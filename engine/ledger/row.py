"""A ledger Row: the unit of truth for every byte MemPlan reports.

Each row is tensor count × bytes per element × replication ÷ the divisor of the group
that really shards it, at one location, live in certain phases of the step, with the
numbers substituted into its formula and a key into ``resources/sources.json``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Location = Literal["hbm", "host", "nvme", "checkpoint"]
RowKind = Literal["persistent", "peak"]
Phase = Literal["steady", "forward", "backward", "optimizer", "checkpoint"]
Scope = Literal["rank", "node", "job"]

PHASES: tuple[Phase, ...] = ("steady", "forward", "backward", "optimizer", "checkpoint")
LOCATIONS: tuple[Location, ...] = ("hbm", "host", "nvme", "checkpoint")

ALL_PHASES: frozenset[Phase] = frozenset(PHASES)


@dataclass(frozen=True, slots=True)
class Row:
    """One named amount of memory.

    ``low`` and ``high`` are equal when the row is exact. ``group`` is the coarse
    category the chart stacks by (weights, gradients, optimizer, activations, ...).
    """

    id: str
    label: str
    location: Location
    kind: RowKind
    group: str
    low: int
    high: int
    formula: str
    source: str
    phases: frozenset[Phase] = field(default=ALL_PHASES)
    scope: Scope = "rank"
    dtype: str | None = None

    def __post_init__(self) -> None:
        if self.low < 0 or self.high < self.low:
            raise ValueError(f"row {self.id}: need 0 ≤ low ≤ high, got {self.low}, {self.high}")

    @property
    def exact(self) -> bool:
        return self.low == self.high

    @property
    def mid(self) -> int:
        return (self.low + self.high) // 2

    def live_in(self, phase: Phase) -> bool:
        return phase in self.phases


def total(rows: list[Row] | tuple[Row, ...], location: Location) -> tuple[int, int]:
    """Sum of low and high over the rows at a location (all phases, as persistent)."""
    low = sum(r.low for r in rows if r.location == location)
    high = sum(r.high for r in rows if r.location == location)
    return low, high
