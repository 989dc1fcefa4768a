"""The step timeline: which rows are live at which moment, and each phase's total.

A phase's total is the largest of its moments. Forward peaks at the loss (every saved
tensor plus the logits); backward has three moments, because saved activations shrink
while gradients grow:

- ``backward.start`` — the loss's backward: all saved activations and the logits'
  gradient temporaries, no parameter gradients yet (zero_grad(set_to_none=True));
- ``backward.layers`` — the last layer's backward: the loss tensors are gone, one
  layer's working set and the gathered units / unsharded gradients are live;
- ``backward.end`` — the first layer's backward: every gradient exists and the saved
  activations are (almost) all freed.

All reference measurements peak at ``backward.start`` (their phases' breakdowns show
no gradients and the 2·T·V·4 B loss temporaries). Gradients are live in forward and at
the start of backward only under gradient accumulation (earlier micro-batches' sums).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from engine.ledger.peaks.runtime import NOT_ALLOCATED
from engine.ledger.row import PHASES, Phase, Row, RowKind

Moment = str
MOMENTS: tuple[tuple[Moment, Phase], ...] = (
    ("steady", "steady"),
    ("forward", "forward"),
    ("backward.start", "backward"),
    ("backward.layers", "backward"),
    ("backward.end", "backward"),
    ("optimizer", "optimizer"),
    ("checkpoint", "checkpoint"),
)

_BACKWARD_ONLY_AT: tuple[tuple[str, frozenset[Moment]], ...] = (
    ("hbm.loss.", frozenset({"backward.start"})),
    ("hbm.activations.saved.", frozenset({"backward.start", "backward.layers"})),
    ("hbm.activations.working.", frozenset({"backward.layers", "backward.end"})),
    ("hbm.gathered.layers", frozenset({"backward.layers", "backward.end"})),
    ("hbm.buckets.reduce_scatter", frozenset({"backward.layers", "backward.end"})),
    ("hbm.buckets.root_grads", frozenset({"backward.layers", "backward.end"})),
)
"""Rows live in backward at only some of its moments, by id prefix."""


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


def _grads_row(r: Row) -> bool:
    return r.group == "gradients" and r.kind == "persistent"


def live_at(r: Row, moment: Moment, phase: Phase, accumulating: bool, keep_all: bool) -> bool:
    """Whether row ``r`` holds memory at ``moment`` of ``phase``."""
    if not r.live_in(phase):
        return False
    if _grads_row(r):
        if moment in ("steady", "checkpoint"):
            return False
        if moment in ("forward", "backward.start", "backward.layers"):
            return accumulating
        return True
    if phase == "backward":
        if keep_all and r.id.startswith("hbm.gathered.layers"):
            return True
        for prefix, moments in _BACKWARD_ONLY_AT:
            if r.id.startswith(prefix):
                return moment in moments
        if r.id.startswith("hbm.gathered.all_gather_buffer") and keep_all:
            return False  # every unit stayed gathered: backward issues no all-gather
    return True


@lru_cache(maxsize=4096)
def _moment_mask(
    rid: str,
    group: str,
    kind: RowKind,
    phases: frozenset[Phase],
    accumulating: bool,
    keep_all: bool,
) -> tuple[bool, ...]:
    """Which of MOMENTS a row with these properties is live at (rows recur across
    estimates with the same ids, so this is computed once per kind of row)."""
    probe = Row(
        id=rid,
        label="",
        location="hbm",
        kind=kind,
        group=group,
        low=0,
        high=0,
        formula="",
        source="",
        phases=phases,
    )
    return tuple(live_at(probe, m, ph, accumulating, keep_all) for m, ph in MOMENTS)


def timeline(rows: tuple[Row, ...], accumulating: bool, keep_all_gathered: bool) -> Timeline:
    """Sum HBM rows counted by PyTorch's allocator at every moment of the step."""
    alloc = [r for r in rows if r.location == "hbm" and r.group not in NOT_ALLOCATED]
    masks = [
        _moment_mask(r.id, r.group, r.kind, r.phases, accumulating, keep_all_gathered)
        for r in alloc
    ]
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
