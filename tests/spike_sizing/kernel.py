"""The sizing kernel: a stage's allocated bytes at each moment, for many shard groups at
once.

    bytes[k, moment] = shape_part[moment] + Σ_parts live[part, moment] · part(N_k)

The shape part (everything that reads TP, PP, CP, the micro-batch and accumulation but
not the shard group: activations, loss, the gathered root and layer units, the optimizer
step counter, inputs and buffers) is worked out once per shape
(:mod:`tests.spike_sizing.shape`). The shard-group parts are sums over
:class:`~tests.spike_sizing.classes.Classes` at the group N = DP × CP
(``engine/ledger/placement.py`` ``dense_dp_group``), evaluated with numpy for a vector of
N. Each part is one of two forms:

- *sharded*: Σ_c copies_c · round_up(ceil(d0_c / N) · rest_c · bytes_c, granularity) —
  FSDP2 gives each rank ceil(d0/N) rows of every parameter, one allocation per tensor
  (torch ``_fsdp_param.py`` ``_init_sharded_param``; the ledger's
  ``engine/ledger/states/allocs.py`` ``state_sized``), for weights, gradients, both AdamW
  moments, the foreach step temporaries, and the gradients made before the first / by
  the last decoder layer (``engine/ledger/peaks/backward_grads.py``);
- *padded unit*: round_up(Σ_t ceil(d0_t / N) · N · rest_t · bytes, granularity), the
  largest decoder-layer unit's all-gather output or reduce-scatter input, every tensor
  padded to N equal chunks (torch ``_fsdp_collectives.py``
  ``foreach_all_gather`` / ``foreach_reduce``; the ledger's ``peaks/gathered.py``
  ``_padded_flat``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from tests.spike_sizing.classes import Classes, IntArray

Weights = Literal["count", "before_first", "last"]
ByteCol = Literal["param_b", "grad_b", "state_b"]
N_MOMENTS = 8  # engine.ledger.row.MOMENTS


@dataclass(frozen=True)
class Sharded:
    """A sharded part: which copies count, which dtype column, trainable tensors only."""

    weights: Weights
    nbytes: ByteCol
    trainable_only: bool


@dataclass(frozen=True)
class PaddedUnit:
    """The largest layer unit's padded all-gather output / reduce-scatter input."""

    bytes_per_elem: int


Form = Sharded | PaddedUnit


@dataclass(frozen=True)
class Part:
    """One shard-group part of a stage: its form and the moments it is live at."""

    row_id: str  # the ledger row it stands for (for the report only)
    form: Form
    live: npt.NDArray[np.int64]  # 0/1 per moment


@dataclass(frozen=True)
class StageKernel:
    """What the kernel needs of one stage of one shape, compiled (:func:`compile_stage`):
    the sharded parts folded into one weight matrix over (class, bytes) terms — a term's
    bytes per rank are round_up(ceil(d0 / N) · rest · bytes, granularity), and a moment's
    sharded bytes are a weighted sum of terms — and the padded units' parts."""

    base_low: IntArray  # per moment, the shape part
    base_high: IntArray
    parts: tuple[Part, ...]  # as found (for the report)
    granularity: int
    term_d0: IntArray  # (T,)
    term_row_bytes: IntArray  # (T,) rest · bytes
    term_weights: IntArray  # (moments, T) copies live at each moment
    padded: tuple[tuple[int, IntArray], ...]  # (bytes per element, live) per padded part
    units: tuple[tuple[IntArray, IntArray], ...]  # each distinct layer unit's (d0, rest)
    classes: Classes


def compile_stage(
    base_low: IntArray,
    base_high: IntArray,
    classes: Classes,
    units: tuple[tuple[IntArray, IntArray], ...],
    parts: tuple[Part, ...],
    granularity: int,
) -> StageKernel:
    """Fold the sharded parts' (copies × live moments) into weights over distinct
    (class, bytes) terms: the rounding is per term, so the sum stays exact."""
    terms: dict[tuple[int, int], int] = {}
    cols: list[IntArray] = []
    padded: list[tuple[int, IntArray]] = []
    for p in parts:
        if isinstance(p.form, PaddedUnit):
            padded.append((p.form.bytes_per_elem, p.live))
            continue
        w: IntArray = getattr(classes, p.form.weights)
        if p.form.trainable_only:
            w = np.where(classes.trainable, w, 0)
        b: IntArray = getattr(classes, p.form.nbytes)
        for c in range(classes.d0.shape[0]):
            if not w[c]:
                continue
            t = terms.setdefault((c, int(b[c])), len(terms))
            if t == len(cols):
                cols.append(np.zeros(N_MOMENTS, dtype=np.int64))
            cols[t] = cols[t] + w[c] * p.live
    keys = list(terms)
    d0 = np.array([classes.d0[c] for c, _ in keys], dtype=np.int64)
    row_bytes = np.array([classes.rest[c] * b for c, b in keys], dtype=np.int64)
    weights = np.stack(cols, axis=1) if cols else np.zeros((N_MOMENTS, 0), dtype=np.int64)
    return StageKernel(
        base_low, base_high, parts, granularity, d0, row_bytes, weights,
        tuple(padded), units, classes,
    )  # fmt: skip


def _round_up(x: IntArray, g: int) -> IntArray:
    return x if g <= 1 else -(-x // g) * g


def sharded_bytes(c: Classes, form: Sharded, n: IntArray, gran: int) -> IntArray:
    """One sharded part, Σ over classes, for every N in ``n`` (shape (K,)): the
    uncompiled form, kept to name a part's bytes in the report."""
    w: IntArray = getattr(c, form.weights)
    if form.trainable_only:
        w = np.where(c.trainable, w, 0)
    rows = -(-c.d0[:, None] // n[None, :])  # (C, K)
    b: IntArray = getattr(c, form.nbytes)
    per = _round_up(rows * (c.rest * b)[:, None], gran)
    out: IntArray = w @ per
    return out


def padded_unit_bytes(
    units: tuple[tuple[IntArray, IntArray], ...], bpe: int, n: IntArray, gran: int
) -> IntArray:
    """The largest unit's padded bytes, for every N in ``n``."""
    best = np.zeros(n.shape, dtype=np.int64)
    for d0, rest in units:
        elems = (-(-d0[:, None] // n[None, :]) * n[None, :] * rest[:, None]).sum(axis=0)
        best = np.maximum(best, _round_up(elems * bpe, gran))
    return best


def moment_bytes(k: StageKernel, n: IntArray) -> tuple[IntArray, IntArray]:
    """(lows, highs), each (K, moments): the stage's allocated bytes at every moment for
    every shard group in ``n``. Shard-group parts are exact (low = high)."""
    per = _round_up(-(-k.term_d0[:, None] // n[None, :]) * k.term_row_bytes[:, None], k.granularity)
    add: IntArray = (k.term_weights @ per).T  # (K, moments)
    for bpe, live in k.padded:
        add = add + padded_unit_bytes(k.units, bpe, n, k.granularity)[:, None] * live[None, :]
    return k.base_low[None, :] + add, k.base_high[None, :] + add
