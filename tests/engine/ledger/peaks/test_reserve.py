"""The ledger's allocator reserve (engine/allocator/reserve.py): persistent states carry
none, the fit counts only what a free-and-retry cannot release, and the stack decides
``expandable_segments``."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from engine.allocator.reserve import ReserveModel, reserved_extra, stuck_extra
from engine.estimate import estimate
from engine.plan import default_plan, with_value, with_values
from engine.stacks.defaults import resolved
from engine.units import MiB

MODEL = ReserveModel(False, (0.05, 0.09), (1.55, 1.74), False)
_BYTES = st.integers(0, 1 << 40)


@given(_BYTES, _BYTES, _BYTES, _BYTES)
def test_persistent_bytes_carry_no_reserve(
    steady: int, transient: int, side: int, more: int
) -> None:
    """Growing the persistent part (the peak and the steady moment by the same bytes)
    leaves the reserve and the stuck part as they were — each state ≥ 10 MiB has its own
    segment (CUDACachingAllocator.cpp get_allocation_size) — and the stuck part never
    exceeds the reserve."""
    peak = steady + transient
    base = reserved_extra(MODEL, peak, peak, (steady, steady), side)
    grown = reserved_extra(MODEL, peak + more, peak + more, (steady + more, steady + more), side)
    assert base == grown
    stuck = stuck_extra(MODEL, peak, peak, (steady, steady))
    assert stuck == stuck_extra(MODEL, peak + more, peak + more, (steady + more,) * 2)
    assert 0 <= stuck[0] <= base[0] and 0 <= stuck[1] <= base[1]


def test_expandable_segments_leave_at_most_a_page_per_stream_pool_stuck() -> None:
    """With expandable segments the free pages are unmapped before an OOM: of 10 GiB
    transient × 0.09 = 0.9 GiB fragmentation at most 3 pools × 20 MiB = 60 MiB is stuck;
    the reserved figure is unchanged."""
    es = MODEL._replace(expandable=True)
    t = 10 * 1024 * MiB
    assert stuck_extra(es, t, t, (0, 0)) == (0, 60 * MiB)
    assert reserved_extra(es, t, t, (0, 0)) == reserved_extra(MODEL, t, t, (0, 0))


def test_torchtitan_sets_expandable_segments_and_the_fit_drops() -> None:
    """torchtitan's stack turns expandable_segments on (others leave PyTorch's default
    off); an explicit value wins. The default plan under torchtitan: same allocated peak,
    a fit peak lower by its fragmentation less 60 MiB."""
    titan = with_value(default_plan(), "stack.name", "torchtitan")
    assert resolved(titan).runtime.expandable_segments is True
    assert resolved(default_plan()).runtime.expandable_segments is False
    off = with_value(titan, "runtime.expandable_segments", False)
    assert resolved(off).runtime.expandable_segments is False
    on_e, off_e = estimate(titan), estimate(off)
    assert on_e.peak == off_e.peak
    assert on_e.fit_peak.high < off_e.fit_peak.high
    assert on_e.heaviest.reserved_peak == off_e.heaviest.reserved_peak


def test_the_reserve_row_formula_names_its_parts() -> None:
    """The row says what it is made of and what cannot be released; the fraction model's
    says it is the pessimistic option."""
    row = next(r for r in estimate(default_plan()).rows if r.id.endswith("allocator_reserve"))
    assert "fragmentation 0.05–0.09 × transient" in row.formula
    assert "cannot be released" in row.formula
    frac = with_values(default_plan(), {"runtime.reserve_model": "fraction"})
    row = next(r for r in estimate(frac).rows if r.id.endswith("allocator_reserve"))
    assert "pessimistic" in row.formula


def test_reserved_stops_at_the_capacity_but_not_below_what_cannot_be_released() -> None:
    """Ceiling 80 GiB, 70 GiB allocated of which 10 GiB steady: 60 GiB transient ×
    0.05–0.09 = 3–5.4 GiB fragmentation + 1.55–1.74 × 8 GiB of side streams = 15.4–19.3
    GiB would pass the card, so reserved stops at 80 GiB (10 GiB over allocated); with
    the ceiling at 71 GiB it stops at what cannot be released (3–5.4 GiB)."""
    gib = 1 << 30
    m = MODEL._replace(ceiling=80 * gib)
    alloc, steady, side = 70 * gib, (10 * gib, 10 * gib), 8 * gib
    assert reserved_extra(m, alloc, alloc, steady, side) == (10 * gib, 10 * gib)
    tight = m._replace(ceiling=71 * gib)
    stuck = stuck_extra(tight, alloc, alloc, steady)
    assert stuck == (int(60 * gib * 0.05), int(60 * gib * 0.09))
    assert reserved_extra(tight, alloc, alloc, steady, side) == stuck
