"""HeldTensor: a tensor as one rank holds it, with the dtypes of its states.

The method (full, LoRA, QLoRA, custom subset) and the precision policy decide these
per tensor, because real runs mix them: a LoRA adapter is fp32 over a bf16 base, and
torch optimizers create moments with ``zeros_like(param)``, so moments follow the
parameter's dtype unless a separate fp32 master copy owns the optimizer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod
from typing import Literal

Category = Literal["model", "frozen", "adapters", "quantized", "virtual"]
"""model: trained weights of the network; frozen: untrained weights; adapters: LoRA;
quantized: QLoRA's NF4 base (counted by its own rows); virtual: a trainable count with
no tensor of its own (custom subset by count: its weights are already counted)."""


@dataclass(frozen=True, slots=True)
class HeldTensor:
    """A tensor as the rank holds it before data-parallel sharding."""

    name: str
    shape: tuple[int, ...]
    unit: str  # wrap unit: "layer.N" or "root"
    category: Category
    trainable: bool
    param_dtype: str
    grad_dtype: str
    state_dtype: str
    group: int  # size of the data-parallel group that shards it
    persistent_full: bool = False  # ZeRO-3 persistence threshold: never partitioned
    count: int = 1  # identical decoder layers this tensor stands for (placement folding)
    numel: int = field(init=False, repr=False, compare=False)  # prod(shape), worked out once

    def __post_init__(self) -> None:
        object.__setattr__(self, "numel", prod(self.shape))
