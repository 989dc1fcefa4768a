"""Reserved memory from a trace: its allocation events replayed under the plan's allocator
settings.

A trace measures what is allocated; :func:`engine.trace.replay.replay` turns the same
request sequence into what a GPU's caching allocator would reserve. This module is the
wiring between the two for every view of a trace (``memplan trace`` text, ``--json``,
the ``-o`` record, the window's trace panel, the report): the plan's
``PYTORCH_CUDA_ALLOC_CONF`` settings as the stack resolves them
(``runtime.expandable_segments``, ``runtime.max_split_size_mb``), the streams the events
use (FSDP2's all-gather outputs and reduce-scatter outputs get pools of their own: see
``alloc_log.py``), and one JSON form kept in the record's ``extra["replay"]`` so a view
reads it back without replaying again. Pure Python: no torch import.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.allocator.events import AllocEventLike
from engine.allocator.rules import AllocatorConfig
from engine.plan import Plan
from engine.stacks.defaults import resolved
from engine.trace.alloc_log import STREAM_NAMES
from engine.trace.replay import ReplayResult, replay, replay_lines
from engine.units import MiB, UnitChoice, fmt_bytes

ONE_STREAM_NOTE = (
    "one stream: every request is served from the default stream's pools (a fake CPU run "
    "has no side streams, and this trace has no FSDP2 all-gather or reduce-scatter outputs)"
)


def allocator_config(plan: Plan) -> AllocatorConfig:
    """The plan's allocator settings with the stack's defaults filled in (torchtitan
    exports ``expandable_segments:True``; PyTorch's own default is off)."""
    rt = resolved(plan).runtime
    split = rt.max_split_size_mb
    return AllocatorConfig(
        expandable_segments=bool(rt.expandable_segments),
        max_split_size=None if split is None else int(split) * MiB,
    )


@dataclass(frozen=True, slots=True)
class TraceReplay:
    """A trace's replay and the settings it ran under."""

    result: ReplayResult
    expandable_segments: bool
    max_split_size_mb: int | None
    streams: tuple[int, ...]

    @property
    def over_allocated(self) -> int:
        """Peak reserved − peak allocated, both the replay's: what
        ``max_memory_reserved() − max_memory_allocated()`` shows after a GPU step, and
        what published (allocated, reserved) pairs give. (The replay's fragmentation is
        taken at the moment reserved last grew, which can be a small late segment.)"""
        return self.result.peak_reserved - self.result.peak_allocated

    def settings(self) -> str:
        """The settings as ``PYTORCH_CUDA_ALLOC_CONF`` would spell them."""
        parts = [f"expandable_segments:{self.expandable_segments}"]
        if self.max_split_size_mb is not None:
            parts.append(f"max_split_size_mb:{self.max_split_size_mb}")
        return ",".join(parts)

    def streams_text(self) -> str:
        """Which streams' pools the replay used, in words."""
        if len(self.streams) <= 1:
            return ONE_STREAM_NOTE
        names = ", ".join(STREAM_NAMES.get(s, f"stream {s}") for s in self.streams)
        return (
            f"{len(self.streams)} streams, each with its own pools ({names}): FSDP2 makes "
            "its all-gather and reduce-scatter outputs on side streams"
        )

    def to_json(self) -> dict[str, Any]:
        r = self.result
        return {
            "peak_allocated": r.peak_allocated,
            "peak_requested": r.peak_requested,
            "peak_reserved": r.peak_reserved,
            "fragmentation": r.fragmentation,
            "unreleasable": r.unreleasable,
            "segments": r.segments,
            "peak_phase": r.peak_phase,
            "retries": r.retries,
            "events": r.events,
            "expandable_segments": self.expandable_segments,
            "max_split_size_mb": self.max_split_size_mb,
            "streams": list(self.streams),
        }

    @classmethod
    def from_json(cls, doc: Any) -> TraceReplay:
        """The inverse of :meth:`to_json`; ``ValueError`` when it is not one."""
        if not isinstance(doc, dict):
            raise ValueError("a trace replay is a JSON object")
        try:
            result = ReplayResult(
                peak_allocated=int(doc["peak_allocated"]),
                peak_requested=int(doc["peak_requested"]),
                peak_reserved=int(doc["peak_reserved"]),
                fragmentation=int(doc["fragmentation"]),
                unreleasable=int(doc["unreleasable"]),
                segments=int(doc["segments"]),
                peak_phase=str(doc["peak_phase"]),
                retries=int(doc["retries"]),
                events=int(doc["events"]),
            )
            split = doc["max_split_size_mb"]
            return cls(
                result,
                bool(doc["expandable_segments"]),
                None if split is None else int(split),
                tuple(int(s) for s in doc["streams"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a trace replay: {type(exc).__name__}: {exc}") from exc


def replay_trace(plan: Plan, events: Sequence[AllocEventLike]) -> TraceReplay:
    """Replay a trace's events under ``plan``'s allocator settings (no capacity: the
    replay reports what the step reserves, not whether it fits)."""
    config = allocator_config(plan)
    split = None if config.max_split_size is None else config.max_split_size // MiB
    streams = tuple(sorted({e.stream for e in events})) or (0,)
    return TraceReplay(replay(events, config), config.expandable_segments, split, streams)


def replay_text(r: TraceReplay, traced_peak: int, units: UnitChoice = "both") -> list[str]:
    """The replay as every text view prints it: the settings and streams, then
    :func:`~engine.trace.replay.replay_lines`, and how the replay's allocated peak
    compares with the tracker's (the replay books whole blocks, as ``allocated_bytes``
    does: 512-B rounding and the large pool's unsplit remainders of up to 1 MiB)."""
    head = f"Reserved (allocator replay, PYTORCH_CUDA_ALLOC_CONF={r.settings()}):"
    gap = r.result.peak_allocated - traced_peak
    same = (
        "equal to the tracker's"
        if gap == 0
        else f"{gap:+,} B from the tracker's (the allocator books whole blocks: 512-B "
        "rounding, unsplit remainders)"
    )
    alloc = r.result.peak_allocated
    share = 100 * r.over_allocated / alloc if alloc else 0.0
    return [
        head,
        *(f"  {line}" for line in replay_lines(r.result, units)),
        f"  peak reserved − peak allocated {fmt_bytes(r.over_allocated, units)} "
        f"({share:.1f} % of allocated)",
        f"  replay peak allocated {same}; {r.streams_text()}",
    ]
