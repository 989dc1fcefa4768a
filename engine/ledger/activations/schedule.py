"""Micro-batches in flight: how many micro-batches' activations a pipeline stage holds at
once under its schedule (Narayanan et al. 2021; Korthikanti et al. 2022 §4.2.3)."""

from __future__ import annotations

from dataclasses import dataclass

from engine.plan import Plan
from engine.units import ceil_div


@dataclass(frozen=True, slots=True)
class InFlight:
    """Micro-batches' worth of this stage's activations held at once: ``num / den``."""

    num: int
    den: int
    why: str

    def times(self, n_bytes: int) -> int:
        return ceil_div(n_bytes * self.num, self.den)

    @property
    def whole(self) -> int:
        return ceil_div(self.num, self.den)


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
        return InFlight(1, 1, "1 micro-batch (no pipeline)")
    if par.pp_schedule == "gpipe":
        return InFlight(m, 1, f"GPipe: all m = {m} micro-batches")
    if v == 1:
        n = min(p - stage, m)
        return InFlight(n, 1, f"1F1B stage {stage}: min(p − s, m) = min({p - stage}, {m}) = {n}")
    n = min(m * v, 2 * (p - stage - 1) + (v - 1) * p + 1)
    return InFlight(
        n, v, f"interleaved 1F1B stage {stage}: {n} chunk forwards of 1/{v} of the stage"
    )
