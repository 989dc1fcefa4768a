"""Parallel placement: which slice of which tensor a rank of a pipeline stage holds.

Placement happens before data-parallel sharding: TP splits the tensors its plan splits,
PP assigns layers to stages, EP divides routed experts. CP holds no state of its own.
The result is the *local* tensor a rank owns, which the sharding strategy then divides
by the size of the group that really shards it.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from engine.models.inventory import Tensor
from engine.models.spec import ArchitectureSpec
from engine.sections.parallel import ParallelismSection
from engine.units import ceil_div

# Megatron-style tensor-parallel layout (Shoeybi et al. 2019): column-parallel
# projections split their output dim (0), row-parallel ones their input dim (1),
# embeddings and lm_head split the vocabulary (dim 0). Others are replicated.
TP_COLUMN_ROLES = frozenset(
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
        "shared_gate",
        "shared_up",
        "q_b",
        "kv_b",
        "embedding",
        "lm_head",
    }
)
TP_ROW_ROLES = frozenset({"o", "down", "expert_down", "shared_down"})
KV_ROLES = frozenset({"k", "v"})
EXPERT_ROLES = frozenset({"expert_gate", "expert_up", "expert_down"})


@dataclass(frozen=True, slots=True)
class LocalTensor:
    """The part of a tensor one rank holds after TP / EP placement."""

    tensor: Tensor
    shape: tuple[int, ...]
    expert: bool  # routed expert: divided by EP and sharded over the expert DP group

    @property
    def numel(self) -> int:
        return prod(self.shape)


def stage_layer_ranges(arch: ArchitectureSpec, par: ParallelismSection) -> list[range]:
    """Decoder layers held by each pipeline stage.

    Explicit ``pp_layer_split`` wins; otherwise layers are balanced with the remainder
    going to the earliest stages (the first stage also holds the embedding, but is the
    one that keeps most micro-batches in flight, so it is the one to check).
    """
    if par.pp_layer_split is not None:
        counts = list(par.pp_layer_split)
    else:
        base, extra = divmod(arch.layers, par.pp)
        counts = [base + (1 if s < extra else 0) for s in range(par.pp)]
    ranges, start = [], 0
    for n in counts:
        ranges.append(range(start, start + n))
        start += n
    return ranges


def _tp_shape(t: Tensor, arch: ArchitectureSpec, tp: int) -> tuple[int, ...]:
    """The local shape under TP. KV heads that TP cannot split are replicated."""
    if tp == 1:
        return t.shape
    shape = list(t.shape)
    if t.role in KV_ROLES and t.kind in ("weight", "bias"):
        local_heads = ceil_div(arch.kv_heads, tp)  # kv_heads < tp: each rank keeps a copy
        shape[0] = local_heads * (t.shape[0] // arch.kv_heads)
    elif t.role in TP_COLUMN_ROLES:
        shape[0] = ceil_div(shape[0], tp)
    elif t.role in TP_ROW_ROLES and t.kind == "weight" and len(shape) > 1:
        shape[1] = ceil_div(shape[1], tp)
    return tuple(shape)


def place_stage(
    tensors: tuple[Tensor, ...], arch: ArchitectureSpec, par: ParallelismSection, stage: int
) -> tuple[LocalTensor, ...]:
    """The local tensors one rank of ``stage`` holds (first EP / TP rank, the heaviest)."""
    layers = stage_layer_ranges(arch, par)[stage]
    first, last = stage == 0, stage == par.pp - 1
    out: list[LocalTensor] = []
    for t in tensors:
        if t.layer is not None:
            if t.layer not in layers:
                continue
        elif t.role in ("embedding", "position_embedding"):
            # Tied embeddings: the last stage keeps its own copy for the output layer.
            if not (first or (last and arch.tied_embeddings and t.role == "embedding")):
                continue
        elif not last:  # final norm, lm_head, MTP modules
            continue
        expert = t.role in EXPERT_ROLES
        if expert and t.layer is not None and par.ep > 1:
            n_experts = arch.moe.num_experts if arch.moe else 1
            index = _expert_index(t)
            if index is not None and index >= ceil_div(n_experts, par.ep):
                continue  # rank 0 of the EP group holds experts [0, E/ep)
        tp = par.expert_tp if expert else par.tp
        out.append(LocalTensor(t, _tp_shape(t, arch, tp), expert))
    return tuple(out)


def _expert_index(t: Tensor) -> int | None:
    parts = t.name.split(".")
    if "experts" in parts:
        i = parts.index("experts")
        if i + 1 < len(parts) and parts[i + 1].isdigit():
            return int(parts[i + 1])
    return None


def dense_dp_group(par: ParallelismSection) -> int:
    """Ranks holding replicas of the same dense tensor slice: DP × CP × EP.

    CP ranks see different tokens but the same weights, and EP ranks hold the same
    dense (non-expert) layers, so all of them form the dense data-parallel group
    (Megatron's data-parallel-with-context group; torchtitan's dp_shard × cp).
    """
    return par.dp * par.cp * par.ep


def expert_dp_group(par: ParallelismSection) -> int:
    """Ranks holding replicas of the same routed expert: DP × CP."""
    return par.dp * par.cp
