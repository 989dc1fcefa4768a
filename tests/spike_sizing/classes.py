"""Classes of identical tensors: what the shard-group parts of a stage read.

A rank's held tensors (:func:`engine.ledger.states.persistent.stage_held`) are grouped
by (shape, dtypes, trainable, which gradient moments they join); a class keeps its dim 0,
the elements of one dim-0 row, and three multiplicities: every copy, the copies whose
gradient exists at ``backward.end`` (all but the stage's first decoder layer and an
untied embedding: ``engine/ledger/peaks/backward_grads.py``
``_made_before_first_layer``) and the copies of the stage's last decoder layer
(``_made_by_last_layer``). Llama-3.1-405B's stage of 126 layers folds to a handful of
classes, against ~1,100 tensors.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from engine.ledger.held import HeldTensor
from engine.ledger.precision import DTYPE_BYTES

EMBEDDING = "model.embed_tokens.weight"
"""The untied input embedding (engine/ledger/peaks/backward_grads.py EMBEDDING)."""

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Classes:
    """Column arrays, one entry per class of identical tensors."""

    d0: IntArray  # dim 0 (FSDP2 shards it: torch/distributed/fsdp/_fully_shard/_fsdp_param.py)
    rest: IntArray  # elements of one dim-0 row
    count: IntArray  # copies (folded decoder layers counted out)
    before_first: IntArray  # copies whose gradient exists at backward.end
    last: IntArray  # copies in the stage's last decoder layer
    param_b: IntArray  # bytes per element of the stored parameter
    grad_b: IntArray
    state_b: IntArray
    trainable: npt.NDArray[np.bool_]
    tensors: int  # tensors the classes stand for


def _layer_no(unit: str) -> int:
    return int(unit.split(".")[1])


def tensor_classes(held: tuple[HeldTensor, ...], tied: bool) -> Classes:
    """Group a stage's held tensors into :class:`Classes`."""
    layers = {t.unit for t in held if t.unit.startswith("layer.")}
    first = min(layers, key=_layer_no) if layers else None
    last = max(layers, key=_layer_no) if layers else None
    acc: dict[tuple[object, ...], list[int]] = defaultdict(lambda: [0, 0, 0])
    tensors = 0
    for t in held:
        tensors += t.count
        if not t.shape or not t.shape[0]:
            continue
        key = (
            t.shape[0],
            t.numel // t.shape[0],
            t.param_dtype,
            t.grad_dtype,
            t.state_dtype,
            t.trainable,
        )
        a = acc[key]
        a[0] += t.count
        untied_embedding = t.unit == "root" and not tied and t.name == EMBEDDING
        if t.unit == first:
            a[1] += t.count - 1
        elif not untied_embedding:
            a[1] += t.count
        if t.unit == last:
            a[2] += 1
    keys = list(acc)

    def col(i: int) -> IntArray:
        return np.array([k[i] for k in keys], dtype=np.int64)

    def nbytes(i: int) -> IntArray:
        return np.array([DTYPE_BYTES[str(k[i])] for k in keys], dtype=np.int64)

    return Classes(
        d0=col(0),
        rest=col(1),
        count=np.array([acc[k][0] for k in keys], dtype=np.int64),
        before_first=np.array([acc[k][1] for k in keys], dtype=np.int64),
        last=np.array([acc[k][2] for k in keys], dtype=np.int64),
        param_b=nbytes(2),
        grad_b=nbytes(3),
        state_b=nbytes(4),
        trainable=np.array([bool(k[5]) for k in keys]),
        tensors=tensors,
    )
