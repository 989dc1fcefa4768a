"""Micro-batches in flight: how many micro-batches' activations a pipeline stage holds at
once under its schedule (Narayanan et al. 2021; Korthikanti et al. 2022 §4.2.3)."""

from __future__ import annotations

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
    par, m = plan.parallelism, plan.batch.grad_accum
    p, v = par.pp, par.virtual_stages
    if p == 1:
        return InFlight(1, 1)
    if par.pp_schedule == "gpipe":
        return InFlight(m, 1, "gpipe", stage, p, m)
    if v == 1:
        return InFlight(min(p - stage, m), 1, "1f1b", stage, p, m)
    n = min(m * v, 2 * (p - stage - 1) + (v - 1) * p + 1)
    return InFlight(n, v, "interleaved", stage, p, m)
