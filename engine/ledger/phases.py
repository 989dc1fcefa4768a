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

from functools import lru_cache, partial
from typing import NamedTuple

from engine.ledger.row import MOMENTS, NOT_ALLOCATED, PHASES, Moment, Phase, Row


class Range(NamedTuple):
    """A low–high byte range (equal ends when exact). A named tuple: as immutable as a
    frozen dataclass and half the cost to build — every stage of every estimate builds
    some thirty."""

    low: int
    high: int

    @property
    def mid(self) -> int:
        return (self.low + self.high) // 2


class Timeline(NamedTuple):
    """Allocated bytes per moment and per phase (a phase spans its moments' largest low
    and largest high)."""

    moments: dict[Moment, Range]
    phases: dict[Phase, Range]
    peak_moment: dict[Phase, Moment]


_PHASE_MOMENTS: tuple[tuple[Phase, tuple[int, ...]], ...] = tuple(
    (ph, tuple(i for i, (_m, p) in enumerate(MOMENTS) if p == ph)) for ph in PHASES
)
"""Each phase and the positions of its moments in MOMENTS."""

_MOMENT_NAMES: tuple[Moment, ...] = tuple(m for m, _ in MOMENTS)


@lru_cache(maxsize=1024)
def live_positions(
    moments: frozenset[Moment], accumulated: frozenset[Moment], accumulating: bool
) -> tuple[int, ...]:
    """The positions in MOMENTS of the moments a row with these moments is live at (rows
    of the same kind recur across estimates, so this is computed once per kind)."""
    return tuple(
        i for i, (m, _) in enumerate(MOMENTS) if m in moments or (accumulating and m in accumulated)
    )


Sums = tuple[tuple[int, int], ...]
"""Allocated (low, high) bytes at each of MOMENTS, in order."""


def moment_sums(rows: tuple[Row, ...] | list[Row], accumulating: bool) -> Sums:
    """Sum the HBM rows PyTorch's allocator counts at every moment of the step.

    Integer sums add: the sums of two row lists added moment by moment equal the sums of
    the joined list, which lets a pipeline stage add its own activation rows to the
    sums of the rows it shares with other stages (:mod:`engine.ledger.stage_rows`)."""
    # rows live at the same moments are summed first (most are: the persistent states,
    # a stage's gathered units), then each sum added at its moments
    by_life: dict[tuple[frozenset[Moment], frozenset[Moment]], list[int]] = {}
    get = by_life.get
    for r in rows:
        if r.location != "hbm" or r.state in NOT_ALLOCATED:  # Row.allocated, inlined
            continue
        life = (r.moments, r.accumulated_moments)
        acc = get(life)
        if acc is None:
            by_life[life] = [r.low, r.high]
        else:
            acc[0] += r.low
            acc[1] += r.high
    lows = [0] * len(MOMENTS)
    highs = [0] * len(MOMENTS)
    for (moments, accumulated), (low, high) in by_life.items():
        for i in live_positions(moments, accumulated, accumulating):
            lows[i] += low
            highs[i] += high
    return tuple(zip(lows, highs, strict=True))


def add_sums(a: Sums, b: Sums) -> Sums:
    """Moment-by-moment sum of two :func:`moment_sums` results."""
    return tuple((x[0] + y[0], x[1] + y[1]) for x, y in zip(a, b, strict=True))


new_range = partial(tuple.__new__, Range)
"""``Range`` from a (low, high) pair, built in C (no Python ``__new__`` frame)."""


def timeline_of(sums: Sums) -> Timeline:
    """The timeline of these moment sums: each moment's range, and each phase's largest
    low and largest high (:func:`phase_totals`)."""
    moments = dict(zip(_MOMENT_NAMES, map(new_range, sums), strict=True))
    phases, peak_moment = phase_totals([low for low, _ in sums], [high for _, high in sums])
    return Timeline(moments, phases, peak_moment)


def phase_totals(
    lows: list[int], highs: list[int]
) -> tuple[dict[Phase, Range], dict[Phase, Moment]]:
    """:func:`timeline_of`'s phases and peak moments of the moment sums given as their
    lows and highs (what a stage's numbers are summed into; the moments' own ranges are
    built when a view asks, :attr:`~engine.ledger.stage_estimate.StageEstimate.moments`)."""
    phases: dict[Phase, Range] = {}
    peak_moment: dict[Phase, Moment] = {}
    for ph, best, rest in _PHASE_SPLIT:
        best_low, best_high = lows[best], highs[best]  # the first with the largest (high, low)
        if not rest:
            phases[ph] = new_range((best_low, best_high))
        else:
            top = best_low
            for i in rest:
                low, high = lows[i], highs[i]
                if high > best_high or (high == best_high and low > best_low):
                    best, best_low, best_high = i, low, high
                if low > top:
                    top = low
            # The phase's peak is at least its largest low and at most its largest high.
            phases[ph] = new_range((top, best_high))
        peak_moment[ph] = _MOMENT_NAMES[best]
    return phases, peak_moment


def peak_phase_of(lows: list[int], highs: list[int]) -> tuple[Phase, int, int]:
    """The peak phase of these moment sums — the first of PHASES with the largest (high,
    low) of its range (:func:`phase_totals`: its moments' largest low and largest high) —
    and the peak's range: the largest high (the peak phase's) and the largest low of
    *any* moment, without the other phases' ranges or peak moments (what the verdict
    needs of every stage of every estimate: the loop is kept plain).

    The low end is every moment's, not only the peak phase's, for the reason a phase's
    range takes its moments' largest low: what a rank holds at its peak is at least what
    it holds at any moment, and each moment holds at least its low — so the peak is at
    least the largest low, wherever it falls. Taken at the peak phase alone it would
    understate the peak where another phase holds less at worst but more at best (the
    optimizer step of a non-AdamW optimizer, whose temporaries' low is 0), and it would
    fall as a rank's states grow, once that phase overtook: the layout search's proofs
    that fewer data-parallel ranks also fail by the low figure need it never to."""
    peak, top_low, top_high = PHASES[0], -1, -1
    for ph, first, rest in _PHASE_SPLIT:
        low, high = lows[first], highs[first]
        for i in rest:
            if highs[i] > high:
                high = highs[i]
            if lows[i] > low:
                low = lows[i]
        if high > top_high or (high == top_high and low > top_low):
            peak, top_low, top_high = ph, low, high
    return peak, max(lows), top_high


_PHASE_SPLIT: tuple[tuple[Phase, int, tuple[int, ...]], ...] = tuple(
    (ph, at[0], at[1:]) for ph, at in _PHASE_MOMENTS
)
"""Each phase, the position of its first moment and those of the others."""
