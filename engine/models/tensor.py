"""The parameter tensor record and the two builders every family shares.

Kept apart from the family modules so that the ledger can import ``Tensor`` and ``Role``
without pulling in any family's quirks.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from math import prod
from typing import Literal

Role = Literal[
    "embedding",
    "position_embedding",
    "q",
    "k",
    "v",
    "qkv",
    "o",
    "q_a",
    "q_b",
    "kv_a",
    "kv_b",
    "latent_norm",
    "gate",
    "up",
    "gate_up",
    "down",
    "norm",
    "qk_norm",
    "router",
    "expert_gate",
    "expert_up",
    "expert_gate_up",
    "expert_down",
    "shared_gate",
    "shared_gate_up",
    "shared_up",
    "shared_down",
    "final_norm",
    "lm_head",
    "mtp",
    "mtp_embedding",
    "mtp_head",
]

TensorKind = Literal["weight", "bias"]

TensorDtype = Literal["fp32", "bf16", "fp16", "fp8_e4m3"]

Module = Literal["main", "mtp"]


@dataclass(frozen=True, slots=True)
class Tensor:
    """One parameter tensor as the checkpoint stores it.

    ``shape`` is always the logical ``(out_features, in_features)`` of a linear map, so the
    role's tensor-parallel split dimension applies to every family alike. GPT-2's
    ``Conv1D`` stores the transpose; ``stored_transposed`` records that and
    ``stored_shape`` gives the shape found in the checkpoint. A ``stacked`` tensor holds
    every routed expert of a layer: ``(E, out, in)``, the linear map's shape behind the
    expert dim (transformers 5 and torchtitan store experts so).
    """

    name: str
    shape: tuple[int, ...]
    role: Role
    kind: TensorKind = "weight"
    layer: int | None = None  # decoder layer index; None for embeddings, final norm, lm_head, MTP
    dtype: TensorDtype = "bf16"  # dtype in the published checkpoint
    stored_transposed: bool = False
    module: Module = "main"  # "mtp": multi-token-prediction module (placed after the last layer)
    expert: int | None = None  # routed-expert index, for expert parallelism
    stacked: bool = False  # dim 0 indexes the routed experts: all of them in one tensor
    keep_fp32: bool = False  # the training code holds it in fp32 whatever the model dtype
    buffer: bool = False  # the training code holds it as a buffer: kept, never trained

    @property
    def numel(self) -> int:
        return prod(self.shape)

    @property
    def stored_shape(self) -> tuple[int, ...]:
        """The shape as written in the checkpoint (transposed for GPT-2 ``Conv1D``)."""
        return tuple(reversed(self.shape)) if self.stored_transposed else self.shape


def linear(
    prefix: str,
    out_f: int,
    in_f: int,
    role: Role,
    bias: bool,
    layer: int | None,
    *,
    transposed: bool = False,
    expert: int | None = None,
) -> Iterator[Tensor]:
    """A linear map's weight ``(out, in)`` and, when present, its bias ``(out,)``."""
    yield Tensor(
        f"{prefix}.weight",
        (out_f, in_f),
        role,
        "weight",
        layer,
        stored_transposed=transposed,
        expert=expert,
    )
    if bias:
        yield Tensor(f"{prefix}.bias", (out_f,), role, "bias", layer, expert=expert)


def norm(prefix: str, width: int, bias: bool, layer: int | None, role: Role) -> Iterator[Tensor]:
    """An RMSNorm (scale only) or LayerNorm (scale and bias) of ``width`` elements."""
    yield Tensor(f"{prefix}.weight", (width,), role, "weight", layer)
    if bias:
        yield Tensor(f"{prefix}.bias", (width,), role, "bias", layer)
