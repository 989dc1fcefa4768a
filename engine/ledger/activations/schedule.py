"""Micro-batches in flight: how many micro-batches' activations a pipeline stage holds at
once under its schedule (Narayanan et al. 2021; Korthikanti et al. 2022 §4.2.3)."""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from typing import Literal, NamedTuple

from engine.plan import Plan
from engine.units import ceil_div


class InFlight(NamedTuple):
    """Micro-batches' worth of this stage's activations held at once: ``num / den``,
    under ``schedule`` at ``stage`` of ``p`` with ``m`` micro-batches (what :attr:`why`
    says, in words written only when a formula is shown). A named tuple: each stage of
    each estimate builds one."""

    num: int
    den: int
    schedule: Literal["none", "gpipe", "1f1b", "interleaved"] = "none"
    stage: int = 0
    p: int = 1
    m: int = 1

    def times(self, n_bytes: int) -> int:
        return ceil_div(n_bytes * self.num, self.den)

    @property
    def whole(self) -> int:
        return ceil_div(self.num, self.den)

    @property
    def why(self) -> str:
        s, m = self.stage, self.m
        if self.schedule == "none":
            return "1 micro-batch (no pipeline)"
        if self.schedule == "gpipe":
            return f"GPipe: all m = {m} micro-batches"
        if self.schedule == "1f1b":
            return f"1F1B stage {s}: min(p − s, m) = min({self.p - s}, {m}) = {self.num}"
        return f"interleaved 1F1B stage {s}: {self.num} chunk forwards of 1/{self.den} of the stage"


def in_flight(plan: Plan, stage: int) -> InFlight:
    """The micro-batches stage ``stage`` keeps in flight.

    1F1B: stage s holds min(p − s, m) micro-batches (the first stage p). Interleaved
    1F1B with v chunks: Megatron's warm-up of 2(p − s − 1) + (v − 1)p chunk forwards
    plus the one in steady state, each of L/(pv) layers — for s = 0 this is
    L·(1 + (p − 1)/(pv)) layers' worth. GPipe holds all m micro-batches.
    """
    return in_flights(plan, (stage,))[0]


def in_flights(plan: Plan, stages: Iterable[int]) -> list[InFlight]:
    """:func:`in_flight` of each of these stages, the plan read once."""
    par, m = plan.parallelism, plan.batch.grad_accum
    p, v = par.pp, par.virtual_stages
    if p == 1:
        return [_NO_PIPELINE for _ in stages]
    if par.pp_schedule == "gpipe":
        return [_new((m, 1, "gpipe", s, p, m)) for s in stages]
    if v == 1:
        return [_new((min(p - s, m), 1, "1f1b", s, p, m)) for s in stages]
    return [
        _new((min(m * v, 2 * (p - s - 1) + (v - 1) * p + 1), v, "interleaved", s, p, m))
        for s in stages
    ]


_NO_PIPELINE = InFlight(1, 1)
_new = partial(tuple.__new__, InFlight)
"""``InFlight`` from a tuple of all its fields, built in C."""
