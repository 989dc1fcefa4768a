"""What each tensor role means for placement: the one table later ledger code consults.

Megatron-style tensor parallelism (Shoeybi et al. 2019): column-parallel projections
split their output dimension (dim 0 of the ``(out, in)`` shape), row-parallel ones their
input dimension (dim 1); embeddings and the output head split the vocabulary (dim 0).
Norms, routers and the low-rank MLA down-projections stay replicated. Routed experts are
what expert parallelism divides; shared experts are dense and are not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import get_args

from engine.models.tensor import Role, Tensor


@dataclass(frozen=True, slots=True)
class RoleInfo:
    """Placement facts for one role."""

    tp_split_dim: int | None  # dim of the logical (out, in) shape TP splits; None = replicated
    expert_parallel: bool  # a routed expert: divided across the EP group
    embedding: bool  # counts as an embedding parameter (vocab or position table, output head)
    lora_target: bool  # a linear projection that LoRA commonly adapts


_COLUMN = frozenset(
    {
        "q",
        "k",
        "v",
        "qkv",
        "gate",
        "up",
        "gate_up",
        "expert_gate",
        "expert_up",
        "expert_gate_up",
        "shared_gate",
        "shared_up",
        "shared_gate_up",
        "q_b",
        "kv_b",
    }
)
_ROW = frozenset({"o", "down", "expert_down", "shared_down"})
_VOCAB = frozenset({"embedding", "lm_head", "mtp_embedding", "mtp_head"})
_EXPERT = frozenset({"expert_gate", "expert_up", "expert_gate_up", "expert_down"})
_EMBEDDING = frozenset({"embedding", "position_embedding", "lm_head", "mtp_embedding", "mtp_head"})
_LORA = frozenset(
    {
        "q",
        "k",
        "v",
        "qkv",
        "o",
        "q_a",
        "q_b",
        "kv_a",
        "kv_b",
        "gate",
        "up",
        "gate_up",
        "down",
        "expert_gate",
        "expert_up",
        "expert_gate_up",
        "expert_down",
        "shared_gate",
        "shared_up",
        "shared_gate_up",
        "shared_down",
    }
)

ALL_ROLES: tuple[Role, ...] = get_args(Role)


def _info(role: Role) -> RoleInfo:
    split: int | None = None
    if role in _COLUMN or role in _VOCAB:
        split = 0
    elif role in _ROW:
        split = 1
    return RoleInfo(split, role in _EXPERT, role in _EMBEDDING, role in _LORA)


_TABLE: dict[str, RoleInfo] = {r: _info(r) for r in ALL_ROLES}


def role_info(role: Role) -> RoleInfo:
    """Placement facts for ``role``."""
    return _TABLE[role]


def tp_split_dim(tensor: Tensor) -> int | None:
    """The dim of ``tensor.shape`` TP splits, or None when TP replicates it.

    Biases of row-parallel projections are added after the all-reduce, so they are
    replicated; biases of column-parallel ones split with their output dimension. A
    stacked experts tensor ``(E, out, in)`` splits the same dim of the map behind E.
    """
    dim = _TABLE[tensor.role].tp_split_dim
    if dim is not None and tensor.stacked:
        dim += 1
    if dim is None or dim >= len(tensor.shape):
        return None
    return dim


def is_expert_parallel(tensor: Tensor) -> bool:
    """Whether expert parallelism divides this tensor (a routed expert's projection)."""
    return _TABLE[tensor.role].expert_parallel


def is_embedding(tensor: Tensor) -> bool:
    """Whether the tensor counts as an embedding parameter in the non-embedding split."""
    return _TABLE[tensor.role].embedding
