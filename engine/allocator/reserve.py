"""The ledger's allocator reserve (reserved − allocated) and the part of it a job cannot
give back, from the caching allocator's rules (:mod:`engine.allocator.rules`).

Why not a share of the whole peak: every request of 10 MiB or more gets a segment of its
own rounded to 2 MiB, so the multi-GB persistent states (flat buffers, sharded
parameters, master weights and moments) waste under 2 MiB each. What the allocator
keeps beyond the live tensors comes from two places:

- *transient churn on the compute stream*: activations, logits and step temporaries are
  freed and made again in other sizes, so split blocks and free gaps stay inside
  segments still in use — ``fragmentation`` × (allocated − the steady, persistent part);
- *per-stream pools*: a block freed on a side stream (FSDP's all-gather and
  reduce-scatter streams, DeepSpeed's) is reused only by that stream, so each stream's
  pool keeps its own high-water; with the compute stream's cached copies of the same
  buffers that is ``side_stream_cache`` × the gathered units and gradient buckets.

Before raising out-of-memory the allocator frees every wholly free cached segment and
retries, so only the fragmentation inside segments still in use can make a job fail:
that is the part the fit test adds (:func:`stuck_extra`). With ``expandable_segments``
free pages are unmapped on that retry too, leaving at most one partial page per stream
pool. The two bands are plan inputs (``runtime.fragmentation`` 0.05–0.09: 0.077 in the
Megatron-LM 1.7B run, 0.059 between torchtitan PR #165's two runs;
``runtime.side_stream_cache`` 1.55–1.74: torchtitan PR #165 keeps 7.6 GiB beyond its
fragmentation where MemPlan's gathered and bucket rows sum to 4.56 GiB), calibrated on
published (allocated, reserved) pairs (``tests/engine/allocator/test_calibration.py``);
the ``fraction`` model keeps the old band over the whole peak as an explicit
pessimistic option.
"""

from __future__ import annotations

from typing import NamedTuple

from engine.allocator.rules import LARGE_BUFFER

STREAM_POOLS = 3
"""Stream pools that may each keep one partial page under expandable segments: the
compute stream and two side streams (FSDP2's all-gather and reduce-scatter)."""


class ReserveModel(NamedTuple):
    """How a plan's reserve is worked out (:func:`engine.ledger.peaks.runtime.reserve_factors`).

    ``fraction``: the old pessimistic model, ``frag`` then being the band over the whole
    allocated peak; otherwise ``frag`` is the compute-stream fragmentation of the
    transient bytes and ``side`` the side-stream multiplier. ``expandable``: whether
    ``expandable_segments`` is on. ``ceiling``: the capacity PyTorch can allocate
    (None: no bound) — the allocator frees its cache and retries before reserving more,
    so reserved never passes it (unless the unreleasable part alone does)."""

    fraction: bool
    frag: tuple[float, float]
    side: tuple[float, float]
    expandable: bool
    ceiling: int | None = None


def reserved_extra(
    m: ReserveModel,
    low: int,
    high: int,
    steady: tuple[int, int] | None = None,
    side: int = 0,
) -> tuple[int, int]:
    """(low, high) of reserved − allocated over an allocated range ``low``–``high`` whose
    persistent part is ``steady`` (None: all of it, so no transient) and whose stage
    holds ``side`` bytes of gathered units and buckets."""
    if m.fraction:
        return int(low * m.frag[0]), int(high * m.frag[1])
    t_low, t_high = _transient(low, high, steady)
    extra = (
        int(t_low * m.frag[0]) + int(side * m.side[0]),
        int(t_high * m.frag[1]) + int(side * m.side[1]),
    )
    if m.ceiling is None:
        return extra
    stuck = stuck_extra(m, low, high, steady)
    high_extra = min(extra[1], max(stuck[1], m.ceiling - high))
    # the row's low never above its high (each end capped by its own room)
    return min(extra[0], max(stuck[0], m.ceiling - low), high_extra), high_extra


def stuck_extra(
    m: ReserveModel, low: int, high: int, steady: tuple[int, int] | None = None
) -> tuple[int, int]:
    """(low, high) of the reserve a free-and-retry cannot give back: what the fit test
    adds to the live tensors. The side-stream caches are wholly free segments between
    uses, so they are released; the compute stream's split segments are not (with
    expandable segments, at most a partial page per stream pool). Under the ``fraction``
    model the whole reserve, as before."""
    if m.fraction:
        return reserved_extra(m, low, high)
    t_low, t_high = _transient(low, high, steady)
    if m.expandable:
        return 0, min(int(t_high * m.frag[1]), STREAM_POOLS * LARGE_BUFFER)
    return int(t_low * m.frag[0]), int(t_high * m.frag[1])


def share_bound(m: ReserveModel) -> float:
    """The most :func:`stuck_extra` grows per allocated byte (for the layout search's
    slack and cross-EP bounds)."""
    return max(m.frag[0], m.frag[1], 0.0)


def _transient(low: int, high: int, steady: tuple[int, int] | None) -> tuple[int, int]:
    if steady is None:
        return 0, 0
    return max(0, low - steady[0]), max(0, high - steady[1])
