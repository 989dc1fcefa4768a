"""The caching allocator's size rules, as PyTorch's CUDA caching allocator applies them.

Read from ``c10/cuda/CUDACachingAllocator.cpp`` (pytorch/pytorch, the constants at the top
of the file, ``round_size``, ``get_allocation_size``, ``get_pool``, ``should_split`` and
the ``max_split_size`` checks in ``get_free_block``); restated here, not copied:

- every request is rounded up to a multiple of 512 B (``kMinBlockSize``);
- a rounded request of at most 1 MiB (``kSmallSize``) is served from the *small* pool,
  whose segments are 2 MiB (``kSmallBuffer``);
- a larger request under 10 MiB (``kMinLargeAlloc``) takes a 20 MiB segment
  (``kLargeBuffer``) of the *large* pool, which later requests may split;
- a request of 10 MiB or more gets a segment of its own size rounded up to 2 MiB
  (``kRoundLarge``) — so a multi-GB persistent state wastes under 2 MiB;
- a free block is split when what is left is at least 512 B (small pool) or more than
  1 MiB (large pool); blocks of ``max_split_size`` or more are never split, and such a
  block serves a request only when it is less than 20 MiB larger;
- free blocks are reused only by the stream that freed them (each stream has its own
  pools), and before raising out-of-memory the allocator frees every cached segment that
  is wholly free and retries.

``expandable_segments`` (``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``) replaces
the per-request segments by one growable segment per stream and pool, mapped in pages of
2 MiB (small pool) or 20 MiB (large pool); fully free pages are unmapped when the
allocator releases its cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from engine.units import MiB

Pool = Literal["small", "large"]

MIN_BLOCK = 512
"""Every request is rounded up to this many bytes (``kMinBlockSize``)."""
SMALL_SIZE = 1 * MiB
"""Largest request served from the small pool (``kSmallSize``)."""
SMALL_BUFFER = 2 * MiB
"""Segment size of the small pool (``kSmallBuffer``)."""
LARGE_BUFFER = 20 * MiB
"""Segment for large requests under :data:`MIN_LARGE_ALLOC` (``kLargeBuffer``)."""
MIN_LARGE_ALLOC = 10 * MiB
"""From this size on a request gets a segment of its own (``kMinLargeAlloc``)."""
ROUND_LARGE = 2 * MiB
"""Such a segment is rounded up to this (``kRoundLarge``)."""


@dataclass(frozen=True, slots=True)
class AllocatorConfig:
    """The ``PYTORCH_CUDA_ALLOC_CONF`` settings the simulator follows.

    ``max_split_size``: blocks this large or larger are never split (None: no limit, the
    default). ``expandable_segments``: one growable segment per stream and pool."""

    expandable_segments: bool = False
    max_split_size: int | None = None


def round_size(nbytes: int) -> int:
    """A request's size as the allocator books it: at least 512 B, a multiple of 512 B."""
    if nbytes < MIN_BLOCK:
        return MIN_BLOCK
    return -(-nbytes // MIN_BLOCK) * MIN_BLOCK


def pool_of(rounded: int) -> Pool:
    """Which pool serves a rounded request."""
    return "small" if rounded <= SMALL_SIZE else "large"


def segment_size(rounded: int) -> int:
    """The size of the segment the allocator asks CUDA for when no cached block fits."""
    if rounded <= SMALL_SIZE:
        return SMALL_BUFFER
    if rounded < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return -(-rounded // ROUND_LARGE) * ROUND_LARGE


def page_size(pool: Pool) -> int:
    """The mapping granularity of an expandable segment of ``pool``."""
    return SMALL_BUFFER if pool == "small" else LARGE_BUFFER


def should_split(pool: Pool, remaining: int) -> bool:
    """Whether a free block used for a request keeps its remainder as a free block."""
    if pool == "small":
        return remaining >= MIN_BLOCK
    return remaining > SMALL_SIZE


def may_serve(config: AllocatorConfig, block_size: int, rounded: int) -> bool:
    """Whether a cached free block of ``block_size`` may serve a request of ``rounded``
    bytes under ``max_split_size``: a small request never takes an oversize block, and an
    oversize request takes one only if it wastes less than 20 MiB."""
    limit = config.max_split_size
    if block_size < rounded:
        return False
    if limit is None:
        return True
    if rounded < limit <= block_size:
        return False
    return not (rounded >= limit and block_size >= rounded + LARGE_BUFFER)


def splittable(config: AllocatorConfig, block_size: int) -> bool:
    """Whether a block may be split at all (blocks of ``max_split_size`` or more are not)."""
    limit = config.max_split_size
    return limit is None or block_size < limit
