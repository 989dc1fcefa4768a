"""The allocation/free sequence of a traced step, for the reserved-memory simulator.

A trace measures what is *allocated*; what a GPU *reserves* depends on the order and
sizes of the requests the caching allocator sees (block splitting, rounding, caching
of freed blocks). So every trace also records that order: one :class:`AllocEvent` per
storage the tracker sees appear (``alloc``) or die (``free``), with the bytes as
requested (before the allocator's 512-B rounding), a block id that pairs each free with
its alloc, the stream and the phase it falls in (``"setup"`` before the first step,
then ``"<step>/<phase>"``, e.g. ``"1/backward"``).

FSDP2 frees a gathered parameter by ``resize_(0)`` and regathers it by resizing back;
the tracker reports both as a size change, recorded here as a free of the old block and
an alloc of a new one — what the caching allocator sees. Re-categorising a storage (an
activation becoming a gradient) is neither.

Streams: a fake CPU run has one stream, so every event starts on 0. FSDP2 on a GPU makes
two of its buffers on side streams (``torch/distributed/fsdp/_fully_shard/
_fsdp_collectives.py``; the streams are ``_fsdp_param_group.py``'s): the all-gather
output in ``foreach_all_gather`` under ``all_gather_copy_in_stream``, and the
reduce-scatter output in ``foreach_reduce`` under ``reduce_scatter_stream`` (the
reduce-scatter *input* is made on the current stream just before, so it stays on 0). The
caching allocator keeps a pool per stream, so those blocks are never reused by the
default stream. The trace tells them apart where the tracker does: the FSDPMemTracker
marks the all-gather output (``All Gather``) right after it is made, and the tracker
sees the reduce-scatter collective's output; :meth:`AllocLog.retag` moves the buffer's
alloc, and its later free, to :data:`ALL_GATHER_STREAM` or
:data:`REDUCE_SCATTER_STREAM`. The stream ids are labels; only their being different
matters to the replay.

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
DEFAULT_STREAM = 0
ALL_GATHER_STREAM = 1
"""FSDP2's all-gather copy-in stream (the all-gather outputs are made there)."""
REDUCE_SCATTER_STREAM = 2
"""FSDP2's reduce-scatter stream (the reduce-scatter outputs are made there)."""
STREAM_NAMES: dict[int, str] = {
    DEFAULT_STREAM: "default",
    ALL_GATHER_STREAM: "all-gather copy-in",
    REDUCE_SCATTER_STREAM: "reduce-scatter",
}


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
    (its bookkeeping object's ``id``); each live one holds its block id, size, stream
    and the index of its alloc event (for :meth:`retag`).
    """

    def __init__(self) -> None:
        self.events: list[AllocEvent] = []
        self.phase = SETUP_PHASE
        self._live: dict[int, tuple[int, int, int, int]] = {}
        self._next_block = 0

    def alloc(self, key: int, nbytes: int, stream: int = DEFAULT_STREAM) -> None:
        """A storage of ``nbytes`` appeared (nothing is recorded for an empty one)."""
        if nbytes <= 0 or key in self._live:
            return
        block = self._next_block
        self._next_block += 1
        self._live[key] = (block, nbytes, stream, len(self.events))
        self.events.append(AllocEvent(ALLOC, nbytes, block, stream, self.phase))

    def free(self, key: int) -> None:
        """The storage died (or was resized to nothing)."""
        live = self._live.pop(key, None)
        if live is not None:
            self.events.append(AllocEvent(FREE, live[1], live[0], live[2], self.phase))

    def resize(self, key: int, nbytes: int) -> None:
        """The storage changed size: its old block is freed, a new one allocated (on
        the same stream)."""
        live = self._live.get(key)
        if live is not None and live[1] == nbytes:
            return
        stream = live[2] if live is not None else DEFAULT_STREAM
        self.free(key)
        self.alloc(key, nbytes, stream)

    def retag(self, key: int, stream: int) -> None:
        """The live storage was made on ``stream``: its alloc event (already recorded)
        and its free to come move there. Nothing happens for a storage not live."""
        live = self._live.get(key)
        if live is None or live[2] == stream:
            return
        block, nbytes, _, index = live
        self._live[key] = (block, nbytes, stream, index)
        old = self.events[index]
        self.events[index] = AllocEvent(old.kind, old.nbytes, old.block, stream, old.phase)

    def streams(self) -> set[int]:
        """The streams the recorded events use."""
        return {e.stream for e in self.events}

    @property
    def live_bytes(self) -> int:
        """Bytes (as requested) of the storages alive now."""
        return sum(live[1] for live in self._live.values())
