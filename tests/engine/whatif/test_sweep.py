"""What-if sweeps: the range syntax, one estimate per value, invalid values reported with
their reason, the fit boundary, cancel."""

from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.estimate import Range, estimate
from engine.plan import Plan, default_plan, with_value, with_values
from engine.whatif.sweep import (
    MAX_POINTS,
    SweepSpec,
    SweepSpecError,
    parse_values,
    parse_vary,
    sweep,
)


def linear_peak(per_unit: int, path: str) -> Any:
    """An estimate() stand-in whose high peak is ``per_unit`` × the swept field (low =
    90 % of it), against the plan's real limit; the verdict follows the engine's rule
    (fits: high ≤ limit; straddles: low ≤ limit < high; else does not fit)."""

    def est(plan: Plan) -> Any:
        node: Any = plan
        for key in path.split("."):
            node = getattr(node, key)
        high = per_unit * int(node)
        low = high * 9 // 10
        limit = plan.hbm_limit_bytes
        verdict = "fits" if high <= limit else "straddles" if low <= limit else "does_not_fit"
        return SimpleNamespace(
            fit_peak=Range(low, high),
            limit_bytes=limit,
            capacity_bytes=plan.hardware.capacity_bytes,
            verdict=verdict,
            verdict_reason=verdict,
        )

    return est


def _cap1000() -> Plan:
    """Capacity 1,000 B, no headroom: the limit is 1,000 B."""
    return with_values(
        default_plan(), {"hardware.usable_hbm_bytes": 1000, "policy.headroom_percent": 0.0}
    )


def test_geometric_range_of_an_integer_field() -> None:
    """1024:32768:x2 = 1024·2^k for k = 0..5: six values, both ends included."""
    assert parse_values("1024:32768:x2", 4096) == (1024, 2048, 4096, 8192, 16384, 32768)


def test_geometric_range_rounds_and_drops_repeats_for_integers() -> None:
    """1:10:x1.5 = 1, 1.5, 2.25, 3.375, 5.06, 7.59 → rounded 1, 2, 2, 3, 5, 8 → the
    repeated 2 is dropped; a float field keeps the exact values."""
    assert parse_values("1:10:x1.5", 1) == (1, 2, 3, 5, 8)
    assert parse_values("1:4:x2", 1.0) == (1.0, 2.0, 4.0)


def test_linear_range_and_lists() -> None:
    """8:64:+8 = 8, 16, …, 64 (eight values); a list keeps its order; non-JSON items of
    a list are strings (categorical fields)."""
    assert parse_values("8:64:+8", 8) == (8, 16, 24, 32, 40, 48, 56, 64)
    assert parse_values("4, 1, 2", 1) == (4, 1, 2)
    assert parse_values("zero1,zero3", "fsdp2") == ("zero1", "zero3")
    assert parse_values("10,12.5", 10.0) == (10.0, 12.5)


@pytest.mark.parametrize(
    ("text", "current", "words"),
    [
        ("", 1, "no values"),
        ("1:8", 1, "start:stop:xK"),
        ("8:1:x2", 1, "larger than stop"),
        ("1:8:x1", 1, "factor above 1"),
        ("0:8:x2", 1, "start > 0"),
        ("1:8:+0", 1, "step above 0"),
        ("1:8:/2", 1, "must start with x"),
        ("a:8:+1", 1, "start must be a number"),
        ("1:100000:+1", 1, f"at most {MAX_POINTS}"),
        ("1:4:+1", "fsdp2", "not numeric"),
        ("1:4:+1", True, "not numeric"),
        ("1,,2", 1, "empty value"),
    ],
)
def test_bad_ranges_say_why(text: str, current: Any, words: str) -> None:
    with pytest.raises(SweepSpecError, match=words):
        parse_values(text, current)


def test_parse_vary_names_the_field() -> None:
    spec = parse_vary("batch.seq_len=1024:4096:x2", default_plan())
    assert spec == SweepSpec("batch.seq_len", (1024, 2048, 4096), "1024:4096:x2")
    with pytest.raises(SweepSpecError, match="unknown field"):
        parse_vary("batch.nope=1,2", default_plan())
    with pytest.raises(SweepSpecError, match="group of fields"):
        parse_vary("runtime.allocator_reserve=1,2", default_plan())
    with pytest.raises(SweepSpecError, match="FIELD=VALUES"):
        parse_vary("batch.seq_len", default_plan())


@given(
    start=st.integers(1, 10_000),
    span=st.integers(0, 10**6),
    factor=st.sampled_from([1.5, 2, 3, 4, 10]),
)
def test_geometric_values_rise_within_the_range(start: int, span: int, factor: float) -> None:
    """Every geometric range of an integer field: strictly increasing, starts at start,
    never passes stop, and the next value after the last would pass it."""
    stop = start + span
    values = parse_values(f"{start}:{stop}:x{factor}", 1)
    assert values[0] == start
    assert all(a < b for a, b in itertools.pairwise(values))
    assert values[-1] <= stop + 0.5
    assert len(values) <= MAX_POINTS


def test_each_point_is_the_plan_estimated_at_that_value() -> None:
    """The sweep's figures are estimate()'s for the varied plan: peak (fit peak low and
    high), limit, capacity and verdict at every value."""
    plan = default_plan()
    s = sweep(plan, SweepSpec("batch.seq_len", (1024, 4096, 16384)))
    for p in s.points:
        e = estimate(with_value(plan, "batch.seq_len", p.value))
        assert (p.low, p.high) == (e.fit_peak.low, e.fit_peak.high)
        assert (p.limit, p.capacity, p.verdict) == (e.limit_bytes, e.capacity_bytes, e.verdict)
    assert s.base_value == 4096 and s.base_hash == plan.config_hash()


def test_boundary_is_the_largest_value_that_fits_when_the_peak_grows() -> None:
    """Peak = 100 B per sequence of micro-batch, limit 1,000 B: micro-batch 10 fits
    (1,000 ≤ 1,000), 12 does not (1,200); values 2, 4, …, 16 → boundary 10."""
    s = sweep(
        _cap1000(),
        SweepSpec("batch.micro_batch", parse_values("2:16:+2", 1)),
        estimator=linear_peak(100, "batch.micro_batch"),
    )
    b = s.boundary
    assert b is not None and (b.kind, b.value, b.index) == ("largest", 10, 4)
    # micro-batch 12: even the low 1,200 · 0.9 = 1,080 B exceeds the limit
    assert [p.verdict for p in s.points][4:6] == ["fits", "does_not_fit"]
    assert s.summary() == "largest batch.micro_batch that fits: 10"


def test_boundary_is_the_smallest_value_that_fits_when_the_peak_falls() -> None:
    """Data-parallel ranks shard the states: peak = 4,000 B / DP, limit 1,000 B → DP 1
    and 2 do not fit (4,000, 2,000), DP 4 does (1,000): the smallest DP that fits is 4."""

    def est(plan: Plan) -> Any:
        e = linear_peak(1, "parallelism.dp")(plan)
        high = 4000 // plan.parallelism.dp
        e.fit_peak = Range(high, high)
        e.verdict = "fits" if high <= e.limit_bytes else "does_not_fit"
        return e

    s = sweep(_cap1000(), SweepSpec("parallelism.dp", (1, 2, 4, 8)), estimator=est)
    b = s.boundary
    assert b is not None and (b.kind, b.value) == ("smallest", 4)


def test_no_boundary_when_every_or_no_value_fits() -> None:
    plan = _cap1000()
    est = linear_peak(1, "batch.micro_batch")
    every = sweep(plan, SweepSpec("batch.micro_batch", (1, 2, 4)), estimator=est)
    assert every.boundary is None and every.summary().startswith("every value")
    est = linear_peak(10_000, "batch.micro_batch")
    none = sweep(plan, SweepSpec("batch.micro_batch", (1, 2, 4)), estimator=est)
    assert none.boundary is None and none.summary().startswith("no value")


def test_invalid_values_are_points_with_their_reason() -> None:
    """TP 3 cannot split the default model's 32 heads (the engine refuses the layout);
    seq_len 0 fails validation: both are points with the reason, and the sweep goes on
    to the values after them."""
    plan = default_plan()
    s = sweep(plan, SweepSpec("parallelism.tp", (1, 3, 4)))
    assert [p.ok for p in s.points] == [True, False, True]
    assert "32 attention heads" in s.points[1].reason
    s = sweep(plan, SweepSpec("batch.seq_len", (0, 1024)))
    assert not s.points[0].ok and "batch.seq_len" in s.points[0].reason
    assert s.points[1].ok
    assert s.summary().endswith("1 value(s) cannot be estimated")


def test_progress_is_told_and_can_cancel() -> None:
    """Progress hears (done, total) after each value; returning False after the second
    keeps the two points and marks the sweep cancelled."""
    heard: list[tuple[int, int]] = []

    def progress(done: int, total: int) -> bool:
        heard.append((done, total))
        return done < 2

    est = linear_peak(1, "batch.micro_batch")
    s = sweep(_cap1000(), SweepSpec("batch.micro_batch", (1, 2, 3, 4)), est, progress)
    assert heard == [(1, 4), (2, 4)]
    assert len(s.points) == 2 and s.cancelled and s.requested == 4
    done = sweep(_cap1000(), SweepSpec("batch.micro_batch", (1, 2)), est, progress)
    assert not done.cancelled  # stopping after the last value is not a cancel
