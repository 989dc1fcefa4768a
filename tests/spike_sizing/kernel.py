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
    """What the kernel needs of one stage of one shape."""

    base_low: IntArray  # per moment, the shape part
    base_high: IntArray
    classes: Classes
    units: tuple[tuple[IntArray, IntArray], ...]  # each distinct layer unit's (d0, rest)
    parts: tuple[Part, ...]
    granularity: int


def _round_up(x: IntArray, g: int) -> IntArray:
    return x if g <= 1 else -(-x // g) * g


def sharded_bytes(c: Classes, form: Sharded, n: IntArray, gran: int) -> IntArray:
    """Σ over classes, for every N in ``n`` (shape (K,))."""
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


def part_bytes(k: StageKernel, part: Part, n: IntArray) -> IntArray:
    if isinstance(part.form, Sharded):
        return sharded_bytes(k.classes, part.form, n, k.granularity)
    return padded_unit_bytes(k.units, part.form.bytes_per_elem, n, k.granularity)


def moment_bytes(k: StageKernel, n: IntArray) -> tuple[IntArray, IntArray]:
    """(lows, highs), each (K, moments): the stage's allocated bytes at every moment for
    every shard group in ``n``. Shard-group parts are exact (low = high)."""
    add = np.zeros((n.shape[0], N_MOMENTS), dtype=np.int64)
    for part in k.parts:
        add += part_bytes(k, part, n)[:, None] * part.live[None, :]
    return k.base_low[None, :] + add, k.base_high[None, :] + add
