"""The for-loop optimizer step's peak worked out in one pass
(:func:`engine.ledger.peaks.optimizer_step.loop_peak`) must equal the maximum over the
spelled-out sequence of allocations it stands for (the reference below)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from engine.ledger.peaks.optimizer_step import loop_peak


def reference_peak(sized: list[tuple[int, int]]) -> int:
    """Each allocation repeated min(copies, 2) times, then max of 2·s_i + s_(i−1)."""
    sizes = [size for size, count in sized for _ in range(min(count, 2))]
    return max((2 * s + (sizes[i - 1] if i else 0) for i, s in enumerate(sizes)), default=0)


@given(st.lists(st.tuples(st.integers(0, 10**12), st.integers(0, 5)), max_size=30))
def test_one_pass_peak_is_the_sequence_maximum(sized: list[tuple[int, int]]) -> None:
    assert loop_peak(sized) == reference_peak(sized)
