"""The verdict's numbers and its words apart (``engine/verdict.py``): ``judge`` and
``deciding`` read only numbers (what ``estimate()`` computes every time), ``reason``
builds the sentence a view shows, read through ``Estimate.verdict_reason``.

Each expected sentence is written out by hand from the figures given, in the wording
the terminal, the window and the report have always shown (the goldens hold it for the
branches their plans reach; this file pins every branch, the deciders the goldens never
reach among them).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from engine.estimate import estimate
from engine.ledger.phases import new_range
from engine.plan import default_plan, with_values
from engine.verdict import Decider, FitParts, decider, deciding, judge, reason

LIMIT, CAPACITY = 1_000, 1_200


def parts(live: int, frag: int, outside: int) -> FitParts:
    """The same parts at both ends."""
    return FitParts((live, live), (frag, frag), (outside, outside))


def test_a_fit_names_the_high_end_parts() -> None:
    # 900 = 700 + 50 + 150 ≤ 1,000: fits, nothing decides
    p, peak = parts(700, 50, 150), new_range((850, 900))
    assert judge(peak, LIMIT) == "fits"
    assert deciding("fits", p, LIMIT) == ""
    assert reason(peak, p, LIMIT, CAPACITY) == (
        "the high estimate 900 B (live tensors 700 B + unreleasable fragmentation 50 B + "
        "outside PyTorch 150 B) is within the limit 1,000 B"
    )


def test_over_the_limit_at_the_low_end_names_the_outside_memory() -> None:
    # low 1,100 > 1,000; live 900 ≤ 1,000 but live + outside 900 + 150 = 1,050 > 1,000:
    # the memory outside PyTorch decides; 1,100 ≤ capacity 1,200: over the limit
    p, peak = parts(900, 50, 150), new_range((1_100, 1_150))
    assert judge(peak, LIMIT) == "does_not_fit"
    assert deciding("does_not_fit", p, LIMIT) == "memory outside PyTorch"
    assert reason(peak, p, LIMIT, CAPACITY) == (
        "even the low estimate 1,100 B (live tensors 900 B + unreleasable fragmentation "
        "50 B + outside PyTorch 150 B) exceeds the limit 1,000 B: memory outside PyTorch "
        "decides"
    )


def test_over_the_capacity_by_live_tensors_says_decide() -> None:
    # low 1,300 > capacity 1,200; live 1,100 > 1,000 alone: "live tensors decide" (plural)
    p, peak = parts(1_100, 50, 150), new_range((1_300, 1_300))
    assert deciding("does_not_fit", p, LIMIT) == "live tensors"
    assert reason(peak, p, LIMIT, CAPACITY) == (
        "even the low estimate 1,300 B (live tensors 1,100 B + unreleasable fragmentation "
        "50 B + outside PyTorch 150 B) exceeds the capacity 1,200 B: live tensors decide"
    )


def test_a_straddle_names_the_high_end_decider() -> None:
    # low 950 ≤ 1,000 < high 1,040; high end: 900 + 100 = 1,000 ≤ 1,000, + 40 = 1,040 > it
    p = FitParts((850, 900), (20, 40), (80, 100))
    peak = new_range((950, 1_040))
    assert judge(peak, LIMIT) == "straddles"
    assert deciding("straddles", p, LIMIT) == "fragmentation"
    assert reason(peak, p, LIMIT, CAPACITY) == (
        "the range 950–1,040 B straddles the limit 1,000 B, at the high end by "
        "fragmentation: measure before buying"
    )


@given(st.integers(0, 2_000), st.integers(0, 2_000), st.integers(0, 500), st.integers(0, 500))
def test_the_decider_is_the_first_part_to_cross_the_limit(
    live: int, spread: int, frag: int, outside: int
) -> None:
    """Whatever the figures, the words name what the numbers decided, and a verdict
    that is not a fit always has a decider (the live tensors when no part crosses)."""
    p = FitParts((live, live + spread), (frag, frag), (outside, outside))
    peak = new_range((live + frag + outside, live + spread + frag + outside))
    verdict = judge(peak, LIMIT)
    who: Decider = deciding(verdict, p, LIMIT)
    end = 0 if verdict == "does_not_fit" else 1
    assert (who == "") == (verdict == "fits")
    if who:
        assert who == (decider(p, LIMIT, end) or "live tensors")
        assert who in reason(peak, p, LIMIT, CAPACITY)


def test_the_estimate_puts_host_problems_before_the_hbm_words() -> None:
    """The default plan on nodes of 64 GiB host RAM (less than its host ledger holds,
    ``tests/engine/ledger/test_offload.py``): the node problem comes first, then "HBM: "
    and the HBM reason (as before the words were lazy), and the node ledgers decide."""
    est = estimate(with_values(default_plan(), {"hardware.host_ram_bytes_per_node": 64 << 30}))
    assert est.verdict == "does_not_fit" and est.decided_by == "host or NVMe"
    hbm = reason(est.fit_peak, est.fit_parts, est.limit_bytes, est.capacity_bytes)
    assert est.node_problems and est.node_problems[0].startswith("host RAM per node ")
    assert est.verdict_reason == "; ".join([*est.node_problems, f"HBM: {hbm}"])
