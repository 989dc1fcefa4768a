"""Sharding strategies: which states a strategy divides, over which group, and how.

The strategy table of memory-model §2 as data. Chunking decides the exact per-rank
count: FSDP2 chunks each tensor on dim 0 (rank 0 holds ceil(d0/N) rows), FSDP1 pads
one flat parameter per wrapped unit, DeepSpeed ZeRO-3 partitions each parameter (padded
to ceil(numel/N)) into flat per-group buffers, and ZeRO-1/2 and Megatron's distributed
optimizer partition one flat buffer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from engine.sections.parallel import HYBRID_STRATEGIES, ParallelismSection, Strategy

Chunking = Literal["dim0", "per_tensor", "per_unit", "flat"]


@dataclass(frozen=True, slots=True)
class StrategyRule:
    """What one strategy shards. ``optimizer`` covers moments and any fp32 master."""

    label: str
    params: bool
    grads: bool
    optimizer: bool
    chunking: Chunking
    source: str
    params_live_unsharded_fwd_bwd: bool = False  # SHARD_GRAD_OP-like: gathered until backward


RULES: dict[Strategy, StrategyRule] = {
    "ddp": StrategyRule("DDP", False, False, False, "flat", "pytorch-ddp"),
    "zero1": StrategyRule("ZeRO-1", False, False, True, "flat", "zero-paper"),
    "zero2": StrategyRule("ZeRO-2", False, True, True, "flat", "zero-paper"),
    "zero3": StrategyRule("ZeRO-3", True, True, True, "per_tensor", "zero-paper"),
    "fsdp1_full_shard": StrategyRule("FSDP1 FULL_SHARD", True, True, True, "per_unit", "fsdp1"),
    "fsdp1_shard_grad_op": StrategyRule(
        "FSDP1 SHARD_GRAD_OP", True, True, True, "per_unit", "fsdp1", True
    ),
    "fsdp1_no_shard": StrategyRule("FSDP1 NO_SHARD", False, False, False, "per_unit", "fsdp1"),
    "fsdp1_hybrid_shard": StrategyRule("FSDP1 HYBRID_SHARD", True, True, True, "per_unit", "fsdp1"),
    "fsdp1_hybrid_shard_zero2": StrategyRule(
        "FSDP1 _HYBRID_SHARD_ZERO2", True, True, True, "per_unit", "fsdp1", True
    ),
    "fsdp2": StrategyRule("FSDP2 fully_shard", True, True, True, "dim0", "fsdp2"),
    "fsdp2_hsdp": StrategyRule("FSDP2 HSDP", True, True, True, "dim0", "fsdp2"),
    "megatron_distopt": StrategyRule(
        "Megatron distributed optimizer", False, False, True, "flat", "megatron-distopt"
    ),
}


def shard_group_size(par: ParallelismSection, replica_group: int, ranks_per_node: int) -> int:
    """The number of ranks that divide a state under this strategy.

    For hybrid strategies it is the shard group (explicit, or the DP ranks of one node:
    a node's ranks ÷ TP, capped by the replica group); otherwise the whole replica group.
    """
    if par.strategy not in HYBRID_STRATEGIES:
        return replica_group
    if par.shard_group_size is not None:
        return min(par.shard_group_size, replica_group)
    per_node = max(1, ranks_per_node // (par.tp * par.cp))
    size = 1
    for cand in range(1, min(per_node, replica_group) + 1):
        if replica_group % cand == 0:
            size = cand
    return size
