"""A shape's candidate layouts as a table: every DP at once, every decisive stage, the
max over the step's moments, the fit peak and the heaviest stage.

The composition follows ``engine/estimate.py``: a stage's allocated peak is the largest
low and the largest high of its moments (``StageTotals.peak``); its fit peak adds the
reserve a free-and-retry cannot release (``engine/allocator/reserve.py`` ``stuck_extra``:
the transient bytes above the steady moment times the compute stream's fragmentation)
and what lies outside the allocator (CUDA context, cuBLAS, NCCL: the shape part
``inside``); the heaviest stage has the largest fit high (first of ties), and the job's
fit low is the largest of any stage (``fit_range``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.allocator.reserve import STREAM_POOLS, ReserveModel
from engine.allocator.rules import LARGE_BUFFER
from tests.spike_sizing.classes import IntArray
from tests.spike_sizing.kernel import moment_bytes
from tests.spike_sizing.shape import ShapeKernel


@dataclass(frozen=True)
class Table:
    """One row per DP of the shape."""

    dp: IntArray
    heaviest: IntArray  # the heaviest stage's number
    peak_low: IntArray  # allocated peak of the heaviest stage
    peak_high: IntArray
    steady_low: IntArray  # its persistent part (the steady moment)
    steady_high: IntArray
    fit_low: IntArray
    fit_high: IntArray
    lows: IntArray  # (K, moments) of the heaviest stage
    highs: IntArray


def _stuck(m: ReserveModel, t_low: IntArray, t_high: IntArray) -> tuple[IntArray, IntArray]:
    """``stuck_extra`` for transient bytes already worked out, vectorised."""
    if m.fraction:
        raise NotImplementedError("the fraction reserve model is not carried by the spike")
    if m.expandable:
        cap = STREAM_POOLS * LARGE_BUFFER
        hi = np.minimum((t_high * m.frag[1]).astype(np.int64), cap)
        return np.zeros_like(t_low), hi
    return (t_low * m.frag[0]).astype(np.int64), (t_high * m.frag[1]).astype(np.int64)


def table(sk: ShapeKernel, dp: IntArray) -> Table:
    """Every DP in ``dp`` of this shape, evaluated at once."""
    n = dp * sk.layout.cp  # the shard group: DP × CP (placement.dense_dp_group)
    per: list[tuple[IntArray, ...]] = []
    for k, inside, model in zip(sk.kernels, sk.inside, sk.reserve, strict=True):
        lows, highs = moment_bytes(k, n)
        p_low, p_high = lows.max(axis=1), highs.max(axis=1)
        assert isinstance(model, ReserveModel)
        s_low, s_high = _stuck(
            model,
            np.maximum(0, p_low - lows[:, 0]),
            np.maximum(0, p_high - highs[:, 0]),
        )
        per.append(
            (p_low, p_high, p_low + s_low + inside[0], p_high + s_high + inside[1], lows, highs)
        )
    fit_highs = np.stack([p[3] for p in per])  # (stages, K)
    top = fit_highs.argmax(axis=0)  # first of ties
    idx = np.arange(dp.shape[0])

    def pick(i: int) -> IntArray:
        out: IntArray = np.stack([p[i] for p in per])[top, idx]
        return out

    lows_all = np.stack([p[4] for p in per])[top, idx]
    highs_all = np.stack([p[5] for p in per])[top, idx]
    return Table(
        dp=dp,
        heaviest=np.array(sk.stages, dtype=np.int64)[top],
        peak_low=pick(0),
        peak_high=pick(1),
        steady_low=lows_all[:, 0],
        steady_high=highs_all[:, 0],
        fit_low=np.stack([p[2] for p in per]).max(axis=0),
        fit_high=pick(3),
        lows=lows_all,
        highs=highs_all,
    )
