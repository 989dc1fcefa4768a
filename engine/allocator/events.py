"""The allocation events the simulator replays: the shape a trace records.

A trace's allocation log (``engine/trace/alloc_log.py``, recorded by the trace) has
exactly this shape; the simulator reads it through :class:`AllocEventLike`, so it does
not depend on the trace's module (which needs the optional torch extra)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

EventKind = Literal["alloc", "free"]


class AllocEventLike(Protocol):
    """What the simulator reads of one event."""

    @property
    def kind(self) -> str: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def block(self) -> int: ...
    @property
    def stream(self) -> int: ...
    @property
    def phase(self) -> str: ...


@dataclass(frozen=True, slots=True)
class AllocEvent:
    """One request to (``alloc``) or release of (``free``) the caching allocator:
    ``nbytes`` as requested (before rounding), ``block`` the id that pairs a free with its
    alloc, ``stream`` the CUDA stream it was made on (0 = the default stream), ``phase``
    the step phase it falls in."""

    kind: EventKind
    nbytes: int
    block: int
    stream: int = 0
    phase: str = ""
