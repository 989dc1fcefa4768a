"""Traced vs the analytic ledger: the peak, each ledger row group, each phase.

The trace's categories are summed into the ledger's row groups by
:data:`engine.trace.result.CATEGORY_GROUP` (one table); the ledger side is the rows
live at the estimate's own peak moment (``reconcile.estimate_by_category``), runtime
and allocator rows excluded — a trace, like ``max_memory_allocated``, has neither.
Phases pair by name; the trace's ``steady`` is what stays live after ``zero_grad``.
One known skew (as for the reference cases): the tracker counts the fp32 logits saved
for the loss's backward as activations, the ledger in its ``logits`` group.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from engine.estimate import Estimate
from engine.trace.result import CATEGORY_GROUP, Snapshot, TraceResult
from engine.validation.reconcile import estimate_by_category

LEDGER_PHASES: tuple[tuple[str, str], ...] = (
    ("forward", "forward"),
    ("backward", "backward"),
    ("optimizer", "optimizer"),
    ("steady", "steady"),
)
"""(trace phase, ledger phase); ``steady`` on the trace side is the end of zero_grad."""


SKEWED: tuple[str, ...] = ("activations", "logits")
"""The two groups that split the saved fp32 logits differently; their sum is compared
too."""


@dataclass(frozen=True, slots=True)
class Line:
    """One traced figure against the ledger's range (None: the ledger has no row)."""

    name: str
    traced: int
    low: int | None
    high: int | None
    parts: tuple[tuple[str, int], ...] = ()  # trace categories summed into ``traced``
    detail: str = ""
    judged_in: str = ""  # the sum line that judges this one (the two sides split it apart)

    @property
    def split_apart(self) -> bool:
        """Whether this group's own figure differs by classification only: the ledger
        and the trace split its bytes with another group differently, so the sum line
        (:attr:`judged_in`) is what is compared — its error is not an error."""
        return bool(self.judged_in)

    @property
    def mid(self) -> int | None:
        return None if self.low is None or self.high is None else (self.low + self.high) // 2

    @property
    def inside(self) -> bool | None:
        if self.low is None or self.high is None:
            return None
        return self.low <= self.traced <= self.high

    @property
    def error_percent(self) -> float | None:
        """(ledger mid − traced) ÷ traced: positive when the ledger is high."""
        mid = self.mid
        if mid is None or not self.traced:
            return None
        return 100.0 * (mid - self.traced) / self.traced


@dataclass(frozen=True, slots=True)
class Comparison:
    peak: Line
    groups: tuple[Line, ...]
    phases: tuple[Line, ...]


def grouped(snapshot: Snapshot) -> dict[str, list[tuple[str, int]]]:
    """A snapshot's categories by ledger group, in the trace's category order."""
    out: dict[str, list[tuple[str, int]]] = {}
    for category, value in snapshot.by_category.items():
        if value:
            out.setdefault(CATEGORY_GROUP.get(category, category), []).append((category, value))
    return out


def _group_lines(result: TraceResult, stage: Any) -> tuple[Line, ...]:
    traced = grouped(result.peak_phase.peak)
    ledger = estimate_by_category(stage)
    names = list(ledger) + [g for g in traced if g not in ledger]
    lines = []
    for name in names:
        parts = tuple(traced.get(name, ()))
        low, high = ledger.get(name, (None, None))
        lines.append(Line(name, sum(v for _, v in parts), low, high, parts))
    pair = [line for line in lines if line.name in SKEWED]
    if len(pair) == len(SKEWED) and all(line.low is not None for line in pair):
        joined = " + ".join(SKEWED)
        lines = [replace(x, judged_in=joined) if x.name in SKEWED else x for x in lines]
        lines.append(
            Line(
                joined,
                sum(line.traced for line in pair),
                sum(line.low or 0 for line in pair),
                sum(line.high or 0 for line in pair),
                detail="the saved fp32 logits are activations to the tracker, logits to the ledger",
            )
        )
    return tuple(lines)


def unseen(stage: Any) -> tuple[int, int]:
    """(low, high) of the allocated rows a fake-tensor trace cannot see: the cuBLAS
    workspaces (state ``workspace``), which ATen allocates when cuBLAS first runs on a
    (handle, stream) — the tracer runs no cuBLAS. They are live at every moment."""
    rows = [r for r in stage.rows if r.state == "workspace" and r.location == "hbm"]
    return sum(r.low for r in rows), sum(r.high for r in rows)


def _phase_lines(result: TraceResult, stage: Any) -> tuple[Line, ...]:
    peaks = result.phase_peaks()
    lines = []
    ws_low, ws_high = unseen(stage)
    for trace_phase, ledger_phase in LEDGER_PHASES:
        rng = stage.phases.get(ledger_phase)
        low, high = (rng.low - ws_low, rng.high - ws_high) if rng is not None else (None, None)
        if trace_phase == "steady":
            lines.append(
                Line("steady", result.steady_end.total, low, high, detail="after zero_grad")
            )
        elif trace_phase in peaks:
            rec = peaks[trace_phase]
            lines.append(Line(trace_phase, rec.peak.total, low, high, detail=rec.moment))
    return tuple(lines)


def compare(result: TraceResult, est: Estimate) -> Comparison:
    """The trace against the estimate's heaviest stage (the trace runs one stage)."""
    stage = est.heaviest
    ws_low, ws_high = unseen(stage)  # the ledger's peak less what the tracer cannot see
    peak = Line(
        "peak",
        result.peak_bytes,
        stage.peak.low - ws_low,
        stage.peak.high - ws_high,
        detail=f"traced in {result.peak_phase.phase}, ledger in {stage.peak_phase} "
        "(less the cuBLAS workspaces)",
    )
    return Comparison(peak, _group_lines(result, stage), _phase_lines(result, stage))
