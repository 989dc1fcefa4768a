"""Properties: verdicts agree with the range and the error's sign; any calibration
proposal is a valid plan edit that its inverse undoes exactly."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine.plan import default_plan, with_values
from engine.validation.calibrate import propose
from engine.validation.reconcile import Figure
from engine.validation.records import MeasuredRecord

byte = st.integers(min_value=0, max_value=2**40)


@given(byte, byte, byte)
def test_verdict_matches_range_and_error_sign(measured: int, a: int, b: int) -> None:
    low, high = min(a, b), max(a, b)
    f = Figure("allocated", measured, low, high)
    assert (f.verdict == "inside") == (low <= measured <= high)
    assert f.error_bytes == measured - (low + high) // 2
    if f.verdict == "above":
        assert f.error_bytes is not None and f.error_bytes > 0
    if f.verdict == "below":
        assert f.error_bytes is not None and f.error_bytes < 0


PLAN = default_plan()


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 2**37), st.floats(0.0, 2.0, allow_nan=False)),
        min_size=1,
        max_size=4,
    ),
    st.floats(0.0, 0.5, allow_nan=False),
)
# allocated a few hundred kB over the default plan's steady part: the transient is tiny, so
# the measured fragmentation is ~4e9, past FractionRange's bound of 10 (clamped, both ends)
@example(pairs=[(12_045_607_425, 1.0)], margin=0.0)
def test_any_proposal_applies_and_undoes(pairs: list[tuple[int, float]], margin: float) -> None:
    records = [
        MeasuredRecord(
            config_hash=PLAN.config_hash(),
            world_size=8,
            rank=i,
            max_allocated_bytes=alloc,
            max_reserved_bytes=int(alloc * (1 + frac)),
        )
        for i, (alloc, frac) in enumerate(pairs)
    ]
    cal = propose(PLAN, records, margin=margin)
    changed = with_values(PLAN, cal.changes)  # always a valid plan
    band = changed.runtime.allocator_reserve
    assert band.low <= band.high
    assert with_values(changed, cal.inverse).config_hash() == PLAN.config_hash()
