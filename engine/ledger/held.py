"""HeldTensor: a tensor as one rank holds it, with the dtypes of its states.

The method (full, LoRA, QLoRA, custom subset) and the precision policy decide these
per tensor, because real runs mix them: a LoRA adapter is fp32 over a bf16 base, and
torch optimizers create moments with ``zeros_like(param)``, so moments follow the
parameter's dtype unless a separate fp32 master copy owns the optimizer.
"""

from __future__ import annotations

from collections.abc import Iterable
from math import prod
from typing import Literal, NamedTuple

Category = Literal["model", "frozen", "adapters", "quantized", "virtual"]
"""model: trained weights of the network; frozen: untrained weights; adapters: LoRA;
quantized: QLoRA's NF4 base (counted by its own rows); virtual: a trainable count with
no tensor of its own (custom subset by count: its weights are already counted)."""


class _Fields(NamedTuple):
    name: str
    shape: tuple[int, ...]
    unit: str  # wrap unit: "layer.N" or "root"
    category: Category
    trainable: bool
    param_dtype: str
    grad_dtype: str
    state_dtype: str
    group: int  # size of the data-parallel group that shards it
    persistent_full: bool  # ZeRO-3 persistence threshold: never partitioned
    count: int  # type: ignore[assignment]  # (shadows tuple.count) identical decoder layers folded
    expert: bool  # a routed expert's: sharded over the expert data-parallel group
    numel: int  # prod(shape), worked out once


class HeldTensor(_Fields):
    """A tensor as the rank holds it before data-parallel sharding.

    A named tuple, not a frozen dataclass: the layout search builds one per tensor for
    each shard group size it tries (thousands per search), and a tuple is several times
    cheaper to build; :func:`regrouped` makes the same tensors at other group sizes
    without building them anew."""

    __slots__ = ()

    def __new__(
        cls,
        name: str,
        shape: tuple[int, ...],
        unit: str,
        category: Category,
        trainable: bool,
        param_dtype: str,
        grad_dtype: str,
        state_dtype: str,
        group: int,
        persistent_full: bool = False,
        count: int = 1,
        expert: bool = False,
    ) -> HeldTensor:
        fields = (name, shape, unit, category, trainable, param_dtype, grad_dtype, state_dtype)
        return _new(cls, (*fields, group, persistent_full, count, expert, prod(shape)))


_new = tuple.__new__
_GROUP = _Fields._fields.index("group")
_COUNT = _Fields._fields.index("count")


def recounted(t: HeldTensor, count: int) -> HeldTensor:
    """``t`` standing for ``count`` identical layers' copies: ``t._replace(count=count)``
    built in C (``_replace`` is a Python call; a stage's first folded layer is
    recounted for every layout the search estimates)."""
    c = _COUNT
    return _new(HeldTensor, (*t[:c], count, *t[c + 1 :]))


def regrouped(held: Iterable[HeldTensor], dense: int, expert: int) -> list[HeldTensor]:
    """``held`` sharded over a ``dense`` data-parallel group (an ``expert`` one for the
    routed experts' tensors): what the tensors are, their dtypes and trainability do not
    depend on the group sizes, so a layout search's DP values share one build of them."""
    g = _GROUP
    return [_new(HeldTensor, (*t[:g], expert if t.expert else dense, *t[g + 1 :])) for t in held]


Regrouping = tuple[tuple[tuple[object, ...], tuple[object, ...], bool], ...]
"""Held tensors cut at their group (:func:`regrouping`): the fields before it, those
after it, and whether the tensor is a routed expert's."""


def regrouping(held: Iterable[HeldTensor]) -> Regrouping:
    """``held`` cut at their shard group field, for :func:`regrouped_from`: a placement's
    tensors are regrouped for every shard group size a layout search tries, and the cut
    (made once) leaves two tuple concatenations per tensor."""
    g = _GROUP
    return tuple([(t[:g], t[g + 1 :], t.expert) for t in held])


def regrouped_from(parts: Regrouping, dense: int, expert: int) -> list[HeldTensor]:
    """:func:`regrouped` of the tensors :func:`regrouping` cut (the same tensors)."""
    d, x = (dense,), (expert,)
    return [_new(HeldTensor, head + (x if e else d) + tail) for head, tail, e in parts]
