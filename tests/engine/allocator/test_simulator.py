"""The allocator simulator on hand-made sequences (each figure derived from the rules of
``c10/cuda/CUDACachingAllocator.cpp`` as :mod:`engine.allocator.rules` states them)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.allocator.events import AllocEvent
from engine.allocator.rules import AllocatorConfig, round_size
from engine.allocator.simulator import OutOfMemory, Simulator
from engine.trace.replay import replay, replay_lines
from engine.units import MiB


def test_small_requests_share_one_2_mib_segment() -> None:
    """Three 1,000 B requests round to 1,024 B each and split one 2 MiB small segment:
    allocated 3,072 B, reserved 2 MiB."""
    sim = Simulator()
    for i in range(3):
        sim.malloc(i, 1_000)
    assert (sim.allocated, sim.reserved, sim.segments_made) == (3_072, 2 * MiB, 1)


def test_a_large_state_gets_its_own_segment() -> None:
    """A 100 MiB + 1 B request: rounded to 100 MiB + 512 B, its own segment rounded to
    102 MiB — reserve 2 MiB − 512 B however long it lives."""
    sim = Simulator()
    sim.malloc(0, 100 * MiB + 1)
    assert sim.reserved - sim.allocated == 2 * MiB - 512


def test_streams_do_not_share_cached_blocks() -> None:
    """A 64 MiB block freed on stream 1 is not reused by stream 0: two segments, 128 MiB
    reserved for 64 MiB live; on the same stream it is reused (64 MiB reserved)."""
    other = replay(
        [
            AllocEvent("alloc", 64 * MiB, 1, 1),
            AllocEvent("free", 0, 1, 1),
            AllocEvent("alloc", 64 * MiB, 2, 0),
        ]
    )
    same = replay(
        [
            AllocEvent("alloc", 64 * MiB, 1, 0),
            AllocEvent("free", 0, 1, 0),
            AllocEvent("alloc", 64 * MiB, 2, 0),
        ]
    )
    assert (other.peak_reserved, other.peak_allocated, other.segments) == (128 * MiB, 64 * MiB, 2)
    assert (same.peak_reserved, same.segments) == (64 * MiB, 1)


def test_fragmentation_from_churn_and_what_retry_releases() -> None:
    """Allocate 40 MiB (A) and 60 MiB (B), each its own segment; free A, ask 50 MiB: A's
    40 MiB segment cannot hold it, so a third segment is made — 150 MiB reserved, 110 MiB
    allocated (peak; 40 MiB of fragmentation). A's free segment is wholly free, so a
    free-and-retry would give back its 40 MiB: the fragmentation is releasable."""
    events = [
        AllocEvent("alloc", 40 * MiB, 1),
        AllocEvent("alloc", 60 * MiB, 2),
        AllocEvent("free", 0, 1),
        AllocEvent("alloc", 50 * MiB, 3),
    ]
    r = replay(events)
    assert (r.peak_reserved, r.peak_allocated) == (150 * MiB, 110 * MiB)
    assert r.fragmentation == 40 * MiB and r.unreleasable == 0


def test_a_split_block_is_stuck_in_its_segment() -> None:
    """A 100 MiB segment split by a 30 MiB request (on reuse) keeps 70 MiB free inside a
    segment in use: that free space cannot be released by a retry."""
    sim = Simulator()
    sim.malloc(1, 100 * MiB)
    sim.free(1)
    sim.malloc(2, 30 * MiB)
    assert (sim.reserved, sim.allocated) == (100 * MiB, 30 * MiB)
    assert sim.releasable() == 0
    sim.free(2)
    assert sim.releasable() == 100 * MiB  # merged back: the whole segment is free


def test_free_and_retry_before_out_of_memory() -> None:
    """Capacity 100 MiB: 60 MiB allocated and freed stays cached; a 70 MiB request would
    need 130 MiB, so the allocator releases the cached segment and succeeds (one retry);
    a further 40 MiB then fails."""
    sim = Simulator(capacity=100 * MiB)
    sim.malloc(1, 60 * MiB)
    sim.free(1)
    sim.malloc(2, 70 * MiB)
    assert (sim.reserved, sim.retries) == (70 * MiB, 1)
    with pytest.raises(OutOfMemory):
        sim.malloc(3, 40 * MiB)


def test_expandable_segments_grow_in_pages_and_reuse_the_tail() -> None:
    """Expandable: 30 MiB maps two 20 MiB pages (40 MiB); a further 10 MiB fits the free
    10 MiB tail without mapping more; 5 MiB more maps one more page (60 MiB). Without it
    the same three requests make three segments: 30 + 10 + 20 MiB (the 5 MiB request
    takes a 20 MiB segment)."""
    ex = Simulator(AllocatorConfig(expandable_segments=True))
    ex.malloc(1, 30 * MiB)
    assert ex.reserved == 40 * MiB
    ex.malloc(2, 10 * MiB)
    assert ex.reserved == 40 * MiB
    ex.malloc(3, 5 * MiB)
    assert ex.reserved == 60 * MiB
    plain = Simulator()
    for i, n in enumerate((30 * MiB, 10 * MiB, 5 * MiB)):
        plain.malloc(i, n)
    assert plain.reserved == 60 * MiB and plain.segments_made == 3
    ex.free(3)
    ex.free(2)
    ex.release_cache()  # the free tail pages are unmapped
    assert ex.reserved == 40 * MiB


_EVENTS = st.lists(
    st.tuples(st.booleans(), st.integers(1, 64 * MiB), st.integers(0, 2)), max_size=60
)


@settings(max_examples=60, deadline=None)
@given(_EVENTS, st.booleans())
def test_counters_match_the_live_blocks(ops: list[tuple[bool, int, int]], expandable: bool) -> None:
    """Whatever the sequence: allocated is the sum of the live blocks' rounded sizes (a
    block may be larger when the remainder was too small to split), reserved holds it,
    and a replay's peaks are ordered requested ≤ allocated ≤ reserved."""
    sim = Simulator(AllocatorConfig(expandable_segments=expandable))
    events: list[AllocEvent] = []
    live: list[int] = []
    for i, (alloc, n, stream) in enumerate(ops):
        if alloc or not live:
            sim.malloc(i, n, stream)
            live.append(i)
            events.append(AllocEvent("alloc", n, i, stream))
        else:
            j = live.pop(0)
            sim.free(j)
            events.append(AllocEvent("free", 0, j, 0))
        assert sim.allocated == sum(b.size for b in sim.live.values())
        assert sim.allocated >= sum(round_size(b.requested) for b in sim.live.values())
        assert sim.reserved >= sim.allocated
        assert sim.reserved == sum(s.mapped for s in sim.segments)
    r = replay(events, AllocatorConfig(expandable_segments=expandable))
    assert r.peak_requested <= r.peak_allocated <= r.peak_reserved
    assert 0 <= r.unreleasable <= r.fragmentation


def test_an_fsdp_like_step_reports_reserved_beside_allocated() -> None:
    """Two units of 100 MiB gathered on stream 1 (all-gather) and freed after use, each
    unit's 150 MiB activations on stream 0 and a 60 MiB reduce-scatter input on stream 2:
    allocated peaks at 100 + 150 × 2 = 400 MiB (both units' activations with the second
    unit gathered); the side streams keep 100 MiB (the freed first unit is reused by the
    second) and 60 MiB cached, so reserved peaks at 400 + 60 = 460 MiB once the
    reduce-scatter input is made (activations 300 MiB live, gathered 100 MiB cached) — no
    formula over the totals knows the 60 MiB was made on another stream."""
    mib = MiB
    ev = [
        AllocEvent("alloc", 100 * mib, 1, 1, "forward"),
        AllocEvent("alloc", 150 * mib, 2, 0, "forward"),
        AllocEvent("free", 0, 1, 1, "forward"),
        AllocEvent("alloc", 100 * mib, 3, 1, "forward"),
        AllocEvent("alloc", 150 * mib, 4, 0, "forward"),
        AllocEvent("free", 0, 3, 1, "forward"),
        AllocEvent("alloc", 60 * mib, 5, 2, "backward"),
        AllocEvent("free", 0, 5, 2, "backward"),
    ]
    r = replay(ev)
    assert (r.peak_allocated, r.peak_reserved) == (400 * mib, 460 * mib)
    assert r.fragmentation == 100 * mib and r.peak_phase == "backward"
    assert r.unreleasable == 0  # the cached unit is a wholly free segment
    text = "\n".join(replay_lines(r, "gib"))
    assert "peak reserved 0.45 GiB" in text and "(in phase 'backward')" in text
