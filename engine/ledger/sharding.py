"""Sharding groups: how many ranks divide a state under the plan's strategy.

What each strategy shards and how it chunks is the strategy table,
:data:`engine.stacks.families.STRATEGIES`; this module sizes the group it shards over.
"""

from __future__ import annotations

from engine.sections.parallel import ParallelismSection
from engine.stacks.families import rule_of


def shard_group_size(par: ParallelismSection, replica_group: int, ranks_per_node: int) -> int:
    """The number of ranks that divide a state under this strategy.

    For hybrid strategies it is the shard group (explicit, or the DP ranks of one node:
    a node's ranks ÷ TP, capped by the replica group); otherwise the whole replica group.
    """
    if not rule_of(par.strategy).hybrid:
        return replica_group
    if par.shard_group_size is not None:
        return min(par.shard_group_size, replica_group)
    per_node = max(1, ranks_per_node // (par.tp * par.cp))
    size = 1
    for cand in range(1, min(per_node, replica_group) + 1):
        if replica_group % cand == 0:
            size = cand
    return size
