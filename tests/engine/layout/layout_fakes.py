"""Fakes for the layout tests: an estimator whose peak is a formula of the layout."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from engine.estimate import Range
from engine.plan import Plan


def fake_estimator(high: Callable[[Plan], int], low: Callable[[Plan], int] | None = None) -> Any:
    """An estimate() stand-in: peak from formulas, limit = capacity less headroom."""

    def est(plan: Plan) -> Any:
        cap = plan.hardware.capacity_bytes
        limit = int(cap * (1 - plan.policy.headroom_percent / 100))
        h = high(plan)
        lo = low(plan) if low else h
        peak = Range(lo, h)
        stage = SimpleNamespace(rows=(), peak_phase="steady", peak=peak, fit_peak=peak)
        nodes = SimpleNamespace(problems=list)
        return SimpleNamespace(
            peak=peak,
            fit_peak=peak,
            limit_bytes=limit,
            capacity_bytes=cap,
            heaviest=stage,
            stages=(stage,),
            nodes=nodes,
        )

    return est


def shards(plan: Plan) -> int:
    p = plan.parallelism
    return p.tp * p.pp * p.cp * p.dp
