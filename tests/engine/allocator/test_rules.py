"""The caching allocator's size rules (``c10/cuda/CUDACachingAllocator.cpp``: the
constants, ``round_size``, ``get_allocation_size``, ``should_split``), hand-derived."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from engine.allocator.rules import (
    AllocatorConfig,
    may_serve,
    pool_of,
    round_size,
    segment_size,
    should_split,
)
from engine.units import MiB


def test_requests_round_to_512_bytes() -> None:
    """1 B and 512 B book 512 B; 513 B books 1,024 B (kMinBlockSize = 512)."""
    assert (round_size(1), round_size(512), round_size(513)) == (512, 512, 1024)


def test_segment_sizes_by_request() -> None:
    """≤ 1 MiB: the small pool's 2 MiB segment; 1 MiB + 512 B up to under 10 MiB: a 20 MiB
    segment; 10 MiB and more: its own size rounded up to 2 MiB (10 MiB + 1 B → 12 MiB;
    a 4,015,130,624 B state → 1,915 × 2 MiB = 4,016,046,080 B, 915,456 B wasted)."""
    assert pool_of(1 * MiB) == "small" and segment_size(1 * MiB) == 2 * MiB
    assert pool_of(1 * MiB + 512) == "large" and segment_size(1 * MiB + 512) == 20 * MiB
    assert segment_size(10 * MiB - 512) == 20 * MiB
    assert segment_size(10 * MiB) == 10 * MiB
    assert segment_size(round_size(10 * MiB + 1)) == 12 * MiB
    assert segment_size(4_015_130_624) == 1_915 * 2 * MiB == 4_016_046_080


def test_split_thresholds() -> None:
    """Small pool: a remainder of 512 B is kept; large pool: only one over 1 MiB."""
    assert should_split("small", 512) and not should_split("small", 0)
    assert not should_split("large", 1 * MiB) and should_split("large", 1 * MiB + 512)


def test_max_split_size_keeps_small_requests_off_oversize_blocks() -> None:
    """max_split_size 64 MiB: a 2 MiB request never takes a 100 MiB cached block; a 90 MiB
    request takes it (wastes 10 MiB < 20 MiB) but an 80 MiB request does not (20 MiB)."""
    cfg = AllocatorConfig(max_split_size=64 * MiB)
    assert not may_serve(cfg, 100 * MiB, 2 * MiB)
    assert may_serve(cfg, 100 * MiB, 90 * MiB)
    assert not may_serve(cfg, 100 * MiB, 80 * MiB)
    assert may_serve(AllocatorConfig(), 100 * MiB, 2 * MiB)


@given(st.integers(min_value=1, max_value=1 << 40))
def test_a_segment_holds_its_request_and_wastes_little(n: int) -> None:
    """Every segment holds the rounded request; from 10 MiB on it wastes under 2 MiB."""
    r = round_size(n)
    assert r >= n and r % 512 == 0 and r - n < 512
    seg = segment_size(r)
    assert seg >= r
    if r >= 10 * MiB:
        assert seg - r < 2 * MiB
