"""The allocation/free sequence of a traced step, for the reserved-memory simulator.

A trace measures what is *allocated*; what a GPU *reserves* depends on the order and
sizes of the requests the caching allocator sees (block splitting, rounding, caching
of freed blocks). So every trace also records that order: one :class:`AllocEvent` per
storage the tracker sees appear (``alloc``) or die (``free``), with the bytes as
requested (before the allocator's 512-B rounding), a block id that pairs each free with
its alloc, the stream (always 0 here: a fake CPU run has one stream) and the phase it
falls in (``"setup"`` before the first step, then ``"<step>/<phase>"``, e.g.
``"1/backward"``).

FSDP2 frees a gathered parameter by ``resize_(0)`` and regathers it by resizing back;
the tracker reports both as a size change, recorded here as a free of the old block and
an alloc of a new one — what the caching allocator sees. Re-categorising a storage (an
activation becoming a gradient) is neither.

Pure data and bookkeeping: no torch import, so the record can be read without the
trace extra. The JSON form is compact — one ``[kind, nbytes, block, stream, phase]``
array per event — because a step of a few layers already has thousands of events.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ALLOC = "alloc"
FREE = "free"
SETUP_PHASE = "setup"
FIELDS: tuple[str, ...] = ("kind", "nbytes", "block", "stream", "phase")
"""The order of an event's values in its JSON array."""


@dataclass(frozen=True, slots=True)
class AllocEvent:
    """One request to (``alloc``) or release of (``free``) device memory."""

    kind: str
    nbytes: int
    block: int
    stream: int
    phase: str

    def to_json(self) -> list[Any]:
        return [self.kind, self.nbytes, self.block, self.stream, self.phase]

    @classmethod
    def from_json(cls, doc: Any) -> AllocEvent:
        """The inverse of :meth:`to_json`; ``ValueError`` when it is not an event."""
        if not isinstance(doc, list | tuple) or len(doc) != len(FIELDS):
            raise ValueError(f"an allocation event is a {len(FIELDS)}-item array: {doc!r}")
        kind, nbytes, block, stream, phase = doc
        if kind not in (ALLOC, FREE):
            raise ValueError(f"allocation event kind must be alloc or free, not {kind!r}")
        return cls(str(kind), int(nbytes), int(block), int(stream), str(phase))


def events_to_json(events: list[AllocEvent] | tuple[AllocEvent, ...]) -> list[list[Any]]:
    """The compact JSON form of a sequence (``record.alloc_events``)."""
    return [e.to_json() for e in events]


def events_from_json(doc: Any) -> tuple[AllocEvent, ...]:
    """A sequence from :func:`events_to_json`; ``ValueError`` on a malformed one."""
    if not isinstance(doc, list):
        raise ValueError("allocation events must be a JSON array")
    return tuple(AllocEvent.from_json(e) for e in doc)


class AllocLog:
    """Records events as the tracker reports storages appearing, resizing and dying.

    Storages are identified by a key the tracker keeps stable while the storage lives
    (its bookkeeping object's ``id``); each live one holds its block id and size.
    """

    def __init__(self) -> None:
        self.events: list[AllocEvent] = []
        self.phase = SETUP_PHASE
        self._live: dict[int, tuple[int, int]] = {}
        self._next_block = 0

    def alloc(self, key: int, nbytes: int) -> None:
        """A storage of ``nbytes`` appeared (nothing is recorded for an empty one)."""
        if nbytes <= 0 or key in self._live:
            return
        block = self._next_block
        self._next_block += 1
        self._live[key] = (block, nbytes)
        self.events.append(AllocEvent(ALLOC, nbytes, block, 0, self.phase))

    def free(self, key: int) -> None:
        """The storage died (or was resized to nothing)."""
        live = self._live.pop(key, None)
        if live is not None:
            self.events.append(AllocEvent(FREE, live[1], live[0], 0, self.phase))

    def resize(self, key: int, nbytes: int) -> None:
        """The storage changed size: its old block is freed, a new one allocated."""
        live = self._live.get(key)
        if live is not None and live[1] == nbytes:
            return
        self.free(key)
        self.alloc(key, nbytes)

    @property
    def live_bytes(self) -> int:
        """Bytes (as requested) of the storages alive now."""
        return sum(n for _, n in self._live.values())
