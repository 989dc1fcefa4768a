"""The fit test: what must fit the card, and which part of it decides.

A job runs out of memory when, at some moment, the live tensors (the cuBLAS workspaces
among them) plus the fragmentation the allocator cannot release plus the memory outside
PyTorch (CUDA context, NCCL buffers) exceed what the card exposes. Cached blocks that are
wholly free do not count: before raising out-of-memory the caching allocator frees them and
retries (``c10/cuda/CUDACachingAllocator.cpp``, the free-and-retry path), so reserved
memory above the live tensors does not by itself make a job fail. The verdict names
which of the three parts pushes the figure over the limit (or, for a fit, what is
left), and keeps allocated and reserved both visible beside it. The limit is the
capacity less the user's own headroom, not a second pessimism on the range.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from engine.ledger.phases import Range
from engine.ledger.stage_estimate import StageTotals

Verdict = Literal["fits", "straddles", "does_not_fit"]

Decider = Literal["live tensors", "memory outside PyTorch", "fragmentation", "host or NVMe", ""]


class FitParts(NamedTuple):
    """The three parts of a stage's fit peak, each (low, high) bytes."""

    live: tuple[int, int]
    fragmentation: tuple[int, int]
    outside: tuple[int, int]


def fit_parts(t: StageTotals) -> FitParts:
    """A stage's fit peak split into live tensors (the allocated peak), the fragmentation
    that cannot be released and the memory outside PyTorch inside the capacity."""
    peak, fit, stuck = t.peak, t.fit_peak, t.stuck  # stuck: worked out with the fit peak
    outside = (fit.low - peak.low - stuck[0], fit.high - peak.high - stuck[1])
    return FitParts((peak.low, peak.high), stuck, outside)


def decider(parts: FitParts, limit: int, end: int) -> Decider:
    """Which part takes the ``end`` (0 low, 1 high) of the fit peak over ``limit``: the
    live tensors alone, then with the memory outside PyTorch, then with the
    fragmentation ("" when the whole fits)."""
    live, outside = parts.live[end], parts.outside[end]
    if live > limit:
        return "live tensors"
    if live + outside > limit:
        return "memory outside PyTorch"
    if live + outside + parts.fragmentation[end] > limit:
        return "fragmentation"
    return ""


def _parts_text(parts: FitParts, end: int) -> str:
    return (
        f"live tensors {parts.live[end]:,} B + unreleasable fragmentation "
        f"{parts.fragmentation[end]:,} B + outside PyTorch {parts.outside[end]:,} B"
    )


def judge(peak: Range, limit: int) -> Verdict:
    """The verdict of the fit peak ``peak`` against the limit: numbers only, so an
    estimate (hundreds per layout search) builds no sentence it may never show."""
    if peak.high <= limit:
        return "fits"
    return "does_not_fit" if peak.low > limit else "straddles"


def deciding(verdict: Verdict, parts: FitParts, limit: int) -> Decider:
    """The part that decides ``verdict`` (of :func:`judge`) when it is not a fit ("" for
    a fit): at the low end when even the low estimate is over the limit, else at the
    high end."""
    if verdict == "fits":
        return ""
    return decider(parts, limit, 0 if verdict == "does_not_fit" else 1) or "live tensors"


def reason(peak: Range, parts: FitParts, limit: int, capacity: int) -> str:
    """The verdict of :func:`judge` in words, with the numbers: built when a view shows
    it (the terminal, the window's badge, a report), never by ``estimate()`` itself."""
    verdict = judge(peak, limit)
    if verdict == "fits":
        return (
            f"the high estimate {peak.high:,} B ({_parts_text(parts, 1)}) is within the "
            f"limit {limit:,} B"
        )
    who = deciding(verdict, parts, limit)
    if verdict == "does_not_fit":
        over = "capacity" if peak.low > capacity else "limit"
        bound = capacity if over == "capacity" else limit
        return (
            f"even the low estimate {peak.low:,} B ({_parts_text(parts, 0)}) exceeds the "
            f"{over} {bound:,} B: {who} decide{'s' if who != 'live tensors' else ''}"
        )
    return (
        f"the range {peak.low:,}–{peak.high:,} B straddles the limit {limit:,} B, "
        f"at the high end by {who}: measure before buying"
    )
