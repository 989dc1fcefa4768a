"""What a regime's proofs (:class:`engine.layout.proofs.regimes.Known`) learn from one estimate
made by the other criterion's search (``minimum._teach_other``).

The regime is DP 1…8 (ascending); ``unknown`` keeps the DPs whose answer is not proven:
above the proven failures and no further than the smallest known fit.
"""

from __future__ import annotations

from dataclasses import replace

from engine.layout.point import Layout
from engine.layout.proofs.regimes import Known

SHAPE = Layout(tp=1, pp=1, cp=1, ep=1, dp=1, micro_batch=1, grad_accum=1, etp=1, pp_split=None)
GROUP = [replace(SHAPE, dp=d) for d in range(1, 9)]


def _dps(known: Known) -> list[int]:
    return [g.dp for g in known.unknown(GROUP)]


def test_an_accepted_estimate_bounds_the_fit_from_above_and_keeps_the_smallest() -> None:
    """A fit at DP 6 leaves DP 1…6 to search; a later fit at DP 7 must not widen that
    (the smaller known fit is kept), one at DP 4 narrows it to 1…4."""
    k = Known()
    k.learn_one(6, accepted=True, all_below_fail=False)
    assert _dps(k) == [1, 2, 3, 4, 5, 6]
    k.learn_one(7, accepted=True, all_below_fail=False)
    assert _dps(k) == [1, 2, 3, 4, 5, 6]
    k.learn_one(4, accepted=True, all_below_fail=False)
    assert _dps(k) == [1, 2, 3, 4]


def test_a_failure_proves_the_smaller_dps_only_when_every_one_fails() -> None:
    """A failure within its slack proves nothing below it (DP 5 may still fit at DP 3);
    one beyond it kills DP 1…5, and a smaller such failure later does not revive any."""
    k = Known()
    k.learn_one(5, accepted=False, all_below_fail=False)
    assert _dps(k) == list(range(1, 9))
    k.learn_one(5, accepted=False, all_below_fail=True)
    assert _dps(k) == [6, 7, 8]
    k.learn_one(2, accepted=False, all_below_fail=True)
    assert _dps(k) == [6, 7, 8]
