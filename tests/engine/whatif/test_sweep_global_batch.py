"""Sweeping DP or the micro-batch with a global batch set keeps it: grad_accum follows
(engine/whatif/sweep.py _changes); a value no whole accumulation reaches says why."""

from __future__ import annotations

from engine.plan import default_plan, with_values
from engine.whatif.sweep import SweepSpec, sweep


def test_sweeping_dp_keeps_a_set_global_batch() -> None:
    """Global batch 32 at micro-batch 1: DP 1, 2, 4, 8 run grad_accum 32, 16, 8, 4 and
    every point is estimated (each failed before: "batch.global_batch (32) ≠ …"); DP 3
    cannot take 32 sequences in whole micro-batches (32 % 3 ≠ 0) and says so."""
    plan = with_values(default_plan(), {"batch.global_batch": 32, "batch.grad_accum": 4})
    s = sweep(plan, SweepSpec("parallelism.dp", (1, 2, 3, 4, 8)))
    by = {p.value: p for p in s.points}
    assert all(by[d].ok for d in (1, 2, 4, 8))
    assert not by[3].ok and "not a multiple" in by[3].reason
