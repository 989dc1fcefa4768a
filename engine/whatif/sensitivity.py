"""Sensitivity: how far the peak moves when each uncertain input crosses its range.

For every input the plan is re-estimated at the low and the high end of its range (one
input at a time) and the high peak recorded: the bars of a tornado chart. An input the
ledger does not use yet gives a zero-width bar, which is the honest answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from engine.errors import PlanError
from engine.estimate import estimate
from engine.layout.proofs.evaluate import Estimator
from engine.plan import Plan, with_values
from engine.stacks.defaults import resolved


@dataclass(frozen=True, slots=True)
class Bar:
    """One tornado bar: the input, its two ends, and the high peak at each."""

    input: str
    label: str
    low_value: Any
    high_value: Any
    peak_at_low: int | None
    peak_at_high: int | None
    base_peak: int
    error: str | None = None

    @property
    def swing(self) -> int:
        if self.peak_at_low is None or self.peak_at_high is None:
            return 0
        return abs(self.peak_at_high - self.peak_at_low)


def _band_ends(
    path: str, label: str, band: Any
) -> tuple[str, str, dict[str, Any], dict[str, Any], Any, Any]:
    """An uncertain low–high input pinned to its low end, and to its high end."""
    return (
        path,
        label,
        {path: {"low": band.low, "high": band.low}},
        {path: {"low": band.high, "high": band.high}},
        band.low,
        band.high,
    )


def _ends(plan: Plan) -> list[tuple[str, str, dict[str, Any], dict[str, Any], Any, Any]]:
    rt, b = resolved(plan).runtime, plan.batch  # a band left to the stack is its default
    band, nccl = rt.activation_band, rt.nccl_bytes_per_communicator
    # the reserve's band the plan's model reads (runtime.reserve_model)
    res_path, res = (
        ("runtime.allocator_reserve", rt.allocator_reserve)
        if rt.reserve_model == "fraction"
        else ("runtime.fragmentation", rt.fragmentation)
    )
    s_lo, s_hi = max(plan.parallelism.cp, b.seq_len // 2), b.seq_len * 2
    m_lo, m_hi = max(1, b.micro_batch // 2), b.micro_batch * 2
    return [
        _band_ends("runtime.activation_band", "activation band", band),
        _band_ends(res_path, "allocator reserve", res),
        _band_ends("runtime.nccl_bytes_per_communicator", "NCCL buffers per communicator", nccl),
        (
            "batch.seq_len",
            "sequence length (½× to 2×)",
            {"batch.seq_len": s_lo},
            {"batch.seq_len": s_hi},
            s_lo,
            s_hi,
        ),
        (
            "batch.micro_batch",
            "micro-batch (½× to 2×)",
            {"batch.micro_batch": m_lo, "batch.global_batch": None},
            {"batch.micro_batch": m_hi, "batch.global_batch": None},
            m_lo,
            m_hi,
        ),
    ]


def sensitivity(plan: Plan, estimator: Estimator | None = None) -> list[Bar]:
    """Tornado data, widest swing first. Raises PlanError if the plan itself fails."""
    est = estimator or estimate
    base = est(plan).fit_peak.high
    bars = []
    for path, label, lo, hi, lo_v, hi_v in _ends(plan):
        try:
            p_lo = est(with_values(plan, lo)).fit_peak.high
            p_hi = est(with_values(plan, hi)).fit_peak.high
        except (PlanError, ValidationError) as exc:
            bars.append(Bar(path, label, lo_v, hi_v, None, None, base, str(exc)))
            continue
        bars.append(Bar(path, label, lo_v, hi_v, p_lo, p_hi, base))
    bars.sort(key=lambda b: -b.swing)
    return bars
