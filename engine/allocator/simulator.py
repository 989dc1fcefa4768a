"""A caching-allocator simulator: segments, blocks and per-stream pools, in pure Python.

It follows the rules of :mod:`engine.allocator.rules` (PyTorch's
``CUDACachingAllocator.cpp``): best fit among the free blocks of the request's stream and
pool, splitting, merging a freed block with free neighbours of its segment, a new segment
from CUDA when nothing fits, and — when a ``capacity`` is given and a new segment would
exceed it — freeing every wholly free cached segment (unmapping free pages of expandable
segments) and retrying before an out-of-memory. It answers what reserved memory a
sequence of requests leaves, which no formula over totals can: reserved depends on the
order, sizes and streams of the requests, not only on their sum.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.allocator.rules import (
    AllocatorConfig,
    Pool,
    may_serve,
    page_size,
    pool_of,
    round_size,
    segment_size,
    should_split,
    splittable,
)


class OutOfMemory(Exception):
    """A request that does not fit the capacity even after the cache was released."""


@dataclass(slots=True, eq=False)
class Block:
    """A piece of a segment: ``[offset, offset + size)``, free or in use."""

    segment: Segment
    offset: int
    size: int
    free: bool = True
    requested: int = 0


@dataclass(slots=True, eq=False)
class Segment:
    """Memory obtained from CUDA for one stream and pool; ``mapped`` is what it holds
    (an expandable segment maps pages as it grows)."""

    stream: int
    pool: Pool
    mapped: int
    expandable: bool
    blocks: list[Block] = field(default_factory=list)

    def wholly_free(self) -> bool:
        return all(b.free for b in self.blocks)


class Simulator:
    """The allocator's state. ``malloc``/``free`` by block id; the counters mirror
    ``torch.cuda.memory_stats``: allocated (rounded sizes), requested, reserved."""

    def __init__(self, config: AllocatorConfig | None = None, capacity: int | None = None):
        self.config = config or AllocatorConfig()
        self.capacity = capacity
        self.segments: list[Segment] = []
        self.live: dict[int, Block] = {}
        self.allocated = 0
        self.requested = 0
        self.reserved = 0
        self.retries = 0
        self.segments_made = 0

    # -- requests -------------------------------------------------------------------

    def malloc(self, block_id: int, nbytes: int, stream: int = 0) -> None:
        rounded = round_size(nbytes)
        pool = pool_of(rounded)
        block = self._find(stream, pool, rounded)
        if block is None:
            block = self._grow(stream, pool, rounded)
        self._use(block, rounded)
        block.requested = nbytes
        self.live[block_id] = block
        self.allocated += block.size
        self.requested += nbytes

    def free(self, block_id: int) -> None:
        block = self.live.pop(block_id)
        self.allocated -= block.size
        self.requested -= block.requested
        block.free = True
        block.requested = 0
        self._merge(block)

    # -- measures -------------------------------------------------------------------

    def cached_free(self) -> int:
        """Reserved bytes held by no live tensor."""
        return self.reserved - self.allocated

    def releasable(self) -> int:
        """The cached bytes a free-and-retry would give back: wholly free segments, and
        the free whole pages of expandable segments."""
        total = 0
        for seg in self.segments:
            if seg.expandable:
                total += _tail_pages(seg)
            elif seg.wholly_free():
                total += seg.mapped
        return total

    def release_cache(self) -> None:
        """Free every wholly free segment and unmap free pages (``empty_cache``, and what
        the allocator does before raising out-of-memory)."""
        kept = []
        for seg in self.segments:
            if seg.expandable:
                self.reserved -= _trim_tail(seg)
                if seg.blocks:
                    kept.append(seg)
            elif seg.wholly_free():
                self.reserved -= seg.mapped
            else:
                kept.append(seg)
        self.segments = kept

    # -- internals ------------------------------------------------------------------

    def _find(self, stream: int, pool: Pool, rounded: int) -> Block | None:
        best: Block | None = None
        for seg in self.segments:
            if seg.stream != stream or seg.pool != pool:
                continue
            for b in seg.blocks:
                fits = b.free and may_serve(self.config, b.size, rounded)
                if fits and (best is None or b.size < best.size):
                    best = b
        return best

    def _grow(self, stream: int, pool: Pool, rounded: int) -> Block:
        if self.config.expandable_segments:
            return self._expand(stream, pool, rounded)
        size = segment_size(rounded)
        self._make_room(size)
        seg = Segment(stream, pool, size, expandable=False)
        block = Block(seg, 0, size)
        seg.blocks.append(block)
        self.segments.append(seg)
        self.reserved += size
        self.segments_made += 1
        return block

    def _expand(self, stream: int, pool: Pool, rounded: int) -> Block:
        seg = next((s for s in self.segments if s.stream == stream and s.pool == pool), None)
        if seg is None:
            seg = Segment(stream, pool, 0, expandable=True)
            self.segments.append(seg)
            self.segments_made += 1
        tail = seg.blocks[-1] if seg.blocks and seg.blocks[-1].free else None
        have = tail.size if tail else 0
        page = page_size(pool)
        grow = -(-(rounded - have) // page) * page
        self._make_room(grow)
        seg.mapped += grow
        self.reserved += grow
        if tail is None:
            tail = Block(seg, seg.mapped - grow, 0)
            seg.blocks.append(tail)
        tail.size += grow
        return tail

    def _make_room(self, size: int) -> None:
        if self.capacity is None or self.reserved + size <= self.capacity:
            return
        self.retries += 1
        self.release_cache()
        if self.reserved + size > self.capacity:
            raise OutOfMemory(
                f"{size:,} B more with {self.reserved:,} B reserved "
                f"({self.allocated:,} B allocated) exceeds {self.capacity:,} B"
            )

    def _use(self, block: Block, rounded: int) -> None:
        seg = block.segment
        remaining = block.size - rounded
        if splittable(self.config, block.size) and should_split(seg.pool, remaining):
            rest = Block(seg, block.offset + rounded, remaining)
            block.size = rounded
            seg.blocks.insert(seg.blocks.index(block) + 1, rest)
        block.free = False

    def _merge(self, block: Block) -> None:
        blocks = block.segment.blocks
        i = blocks.index(block)
        if i + 1 < len(blocks) and blocks[i + 1].free:
            block.size += blocks.pop(i + 1).size
        if i > 0 and blocks[i - 1].free:
            prev = blocks[i - 1]
            prev.size += blocks.pop(i).size


def _tail_pages(seg: Segment) -> int:
    """The whole free pages at the end of an expandable segment. (PyTorch also unmaps
    free pages inside it; this model keeps them mapped, so it releases a little less.)"""
    if not seg.blocks or not seg.blocks[-1].free:
        return 0
    page = page_size(seg.pool)
    start = -(-seg.blocks[-1].offset // page) * page
    return max(0, seg.mapped - start)


def _trim_tail(seg: Segment) -> int:
    """Unmap :func:`_tail_pages`; the bytes unmapped."""
    cut = _tail_pages(seg)
    if cut == 0:
        return 0
    tail = seg.blocks[-1]
    tail.size -= cut
    seg.mapped -= cut
    if tail.size == 0:
        seg.blocks.pop()
    return cut
