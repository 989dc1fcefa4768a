"""Replay a trace's allocation events through the allocator simulator.

A trace sees every request the stack's code makes of the caching allocator; allocated
memory follows from them alone, but reserved memory depends on how the allocator caches
and splits blocks per stream. :func:`replay` runs the events through
:class:`~engine.allocator.simulator.Simulator` and reports peak reserved and the
fragmentation beside peak allocated — the figures ``torch.cuda.max_memory_reserved`` and
``max_memory_allocated`` give on a GPU. Pure Python: no torch import.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from engine.allocator.events import AllocEventLike
from engine.allocator.rules import AllocatorConfig
from engine.allocator.simulator import Simulator
from engine.units import UnitChoice, fmt_bytes


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """What the replay measured.

    ``peak_allocated``: largest sum of live blocks (rounded, as ``max_memory_allocated``);
    ``peak_requested``: the same of the sizes as requested; ``peak_reserved``: largest
    reserved (``max_memory_reserved``); ``fragmentation``: reserved − allocated at the
    moment reserved peaked; ``unreleasable``: the part of it a free-and-retry could not
    give back (free blocks inside segments still in use); ``segments``: segments obtained
    from CUDA over the replay; ``peak_phase``: the phase of the event that set the
    reserved peak; ``retries``: free-and-retry passes (with a capacity)."""

    peak_allocated: int
    peak_requested: int
    peak_reserved: int
    fragmentation: int
    unreleasable: int
    segments: int
    peak_phase: str
    retries: int
    events: int

    @property
    def fragmentation_share(self) -> float:
        """Fragmentation as a share of the allocated peak (0 when nothing was allocated)."""
        return self.fragmentation / self.peak_allocated if self.peak_allocated else 0.0


def replay(
    events: Iterable[AllocEventLike],
    config: AllocatorConfig | None = None,
    capacity: int | None = None,
) -> ReplayResult:
    """Run ``events`` in order through a fresh simulator. A ``free`` of a block never
    allocated is ignored (a trace may start after the block was made)."""
    sim = Simulator(config, capacity)
    peak_alloc = peak_req = peak_res = frag = stuck = n = 0
    phase = ""
    for ev in events:
        n += 1
        if ev.kind == "alloc":
            sim.malloc(ev.block, ev.nbytes, ev.stream)
        elif ev.block in sim.live:
            sim.free(ev.block)
        peak_alloc = max(peak_alloc, sim.allocated)
        peak_req = max(peak_req, sim.requested)
        if sim.reserved > peak_res:
            peak_res, phase = sim.reserved, ev.phase
            frag = sim.reserved - sim.allocated
            stuck = frag - sim.releasable()
    return ReplayResult(
        peak_allocated=peak_alloc,
        peak_requested=peak_req,
        peak_reserved=peak_res,
        fragmentation=frag,
        unreleasable=stuck,
        segments=sim.segments_made,
        peak_phase=phase,
        retries=sim.retries,
        events=n,
    )


def replay_lines(r: ReplayResult, units: UnitChoice = "both") -> list[str]:
    """The replay as ``memplan trace`` prints it beside the traced allocated peak: peak
    allocated, peak reserved and the fragmentation (and the part no retry releases)."""
    share = f"{100 * r.fragmentation_share:.1f} % of allocated"
    return [
        f"Allocator replay ({r.events:,} events, {r.segments:,} segments):",
        f"  peak allocated {fmt_bytes(r.peak_allocated, units)}; "
        f"peak reserved {fmt_bytes(r.peak_reserved, units)} (in phase '{r.peak_phase}')",
        f"  fragmentation at the reserved peak {fmt_bytes(r.fragmentation, units)} ({share}), "
        f"{fmt_bytes(r.unreleasable, units)} of it not releasable before an out-of-memory",
    ]
