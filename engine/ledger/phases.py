"""The step timeline: which rows are live at which moment, and each phase's total.

A phase's total is the largest of its moments. Forward peaks at the loss (every saved
tensor plus the logits); backward has four moments, in the order they happen, because
saved activations shrink while gradients grow and FSDP2's buffers come and go:

- ``backward.start`` — the loss's backward: all saved activations and the logits'
  gradient temporaries, no parameter gradients yet (zero_grad(set_to_none=True));
- ``backward.layers`` — the last layer's backward: the loss tensors and the head's
  saved tensors (final norm, lm_head input) are gone — freed by the first ops of
  backward —, one layer's working set and the gathered units are live, FSDP2's
  all-gather buffer holds the prefetched next unit, and no reduce-scatter has run yet;
- ``backward.middle`` — a middle layer's backward (stages of three layers or more):
  one layer's saved set fewer, and FSDP2 holds both the prefetch buffer and the
  previous layer's reduce-scatter input (one reduce-scatter buffer is live at a time);
- ``backward.end`` — the first layer's backward: only its own saved set is left, every
  later gradient exists, the previous reduce-scatter input is live and — nothing being
  left to prefetch — no all-gather buffer.

All reference measurements peak at ``backward.start`` (their phases' breakdowns show
no gradients and the 2·T·V·4 B loss temporaries). Gradients are live in forward and at
the start of backward only under gradient accumulation (earlier micro-batches' sums).

Each row carries the moments it is live at (:attr:`Row.moments`, set where it is built
from its phases and the named backward sets in :mod:`engine.ledger.row`); this module
only sums them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from engine.ledger.row import MOMENTS, PHASES, Moment, Phase, Row


@dataclass(frozen=True, slots=True)
class Span:
    low: int
    high: int


@dataclass(frozen=True, slots=True)
class Timeline:
    """Allocated bytes per moment and per phase (a phase spans its moments' largest low
    and largest high)."""

    moments: dict[Moment, Span]
    phases: dict[Phase, Span]
    peak_moment: dict[Phase, Moment]


@lru_cache(maxsize=1024)
def _mask(
    moments: frozenset[Moment], accumulated: frozenset[Moment], accumulating: bool
) -> tuple[bool, ...]:
    """Which of MOMENTS a row with these moments is live at (rows of the same kind recur
    across estimates, so this is computed once per kind)."""
    return tuple(m in moments or (accumulating and m in accumulated) for m, _ in MOMENTS)


def timeline(rows: tuple[Row, ...], accumulating: bool) -> Timeline:
    """Sum the HBM rows PyTorch's allocator counts at every moment of the step."""
    alloc = [r for r in rows if r.allocated]
    masks = [_mask(r.moments, r.accumulated_moments, accumulating) for r in alloc]
    moments: dict[Moment, Span] = {}
    for i, (m, _ph) in enumerate(MOMENTS):
        live = [r for r, mask in zip(alloc, masks, strict=True) if mask[i]]
        moments[m] = Span(sum(r.low for r in live), sum(r.high for r in live))
    phases: dict[Phase, Span] = {}
    peak_moment: dict[Phase, Moment] = {}
    for ph in PHASES:
        ms = [m for m, p in MOMENTS if p == ph]
        best = max(ms, key=lambda m: (moments[m].high, moments[m].low))
        # The phase's peak is at least its largest low and at most its largest high.
        phases[ph] = Span(max(moments[m].low for m in ms), moments[best].high)
        peak_moment[ph] = best
    return Timeline(moments, phases, peak_moment)
