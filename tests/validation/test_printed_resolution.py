"""A single published figure is as wide as its last printed digit (engine/validation/
printed.py): "62.0 GiB" is [61.95, 62.05) GiB. Hand-derived half steps, and the inside
test at both sides of that edge."""

from __future__ import annotations

import pytest

from engine.units import GiB
from engine.validation.printed import half_step_gib
from engine.validation.published import PublishedCase, compare, parse_case


@pytest.mark.parametrize(
    ("printed", "low", "high", "half"),
    [
        ("82.4 GiB", 82.4, 82.4, 0.05),  # torchtitan table: one decimal → ±0.05 GiB
        ("17.6 GiB (Peak Memory Active)", 17.6, 17.6, 0.05),  # torchtune README
        ("20.97 GiB", 20.97, 20.97, 0.005),  # Answer.AI train.py: two decimals
        ("19.77 GB (10^9 bytes)", 18.412, 18.412, 0.005e9 / 2**30),  # LitGPT: GB
        ("64 GB (80%)", 63.32, 64.12, 0.0),  # a published range keeps its own width
        ("max allocated: 50277.15625 MB", 49.099, 49.099, 0.0),  # not a GiB/GB figure
        ("max context 28,454 tokens on 80 GB", 79.15, 79.15, 0.0),  # not a memory figure
    ],
)
def test_half_step(printed: str, low: float, high: float, half: float) -> None:
    assert half_step_gib(printed, low, high) == pytest.approx(half, rel=1e-12)


def _case(printed: str, figure: float) -> PublishedCase:
    return parse_case(
        {
            "id": "t",
            "stack": "s",
            "source": {"url": "https://example.org/x"},
            "quote": "q",
            "measured": {
                "basis": "allocated",
                "low_gib": figure,
                "high_gib": figure,
                "as_published": printed,
            },
            "expressible": "yes",
            "memplan": {"preset": "llama-3.1-8b", "set": {}},
        }
    )


def test_inside_up_to_half_the_last_digit() -> None:
    case = _case("62.0 GiB", 62.0)
    # MemPlan 62.04–71.7 GiB: its low end is inside [61.95, 62.05) → inside.
    inside, error = compare(case, int(62.04 * GiB), int(71.7 * GiB), 0)
    assert inside
    # The error stays against the printed figure: midpoint 66.87 vs 62.0 → +7.85 %.
    assert error == pytest.approx((66.87 - 62.0) / 62.0 * 100, abs=1e-3)
    # 62.06 is beyond the last digit's reach → outside.
    assert not compare(case, int(62.06 * GiB), int(71.7 * GiB), 0)[0]
    # Two printed decimals narrow the reach tenfold: 62.00 does not reach 62.006.
    assert not compare(_case("62.00 GiB", 62.0), int(62.006 * GiB), int(70 * GiB), 0)[0]
