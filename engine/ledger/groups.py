"""The process groups one rank of a pipeline stage joins: their sizes and where their
ranks sit.

Ranks are numbered as Megatron-Core numbers them by default (``parallel_state.py``
``initialize_model_parallel``, ``order="tp-cp-ep-dp-pp"``; torchtitan's device mesh
``["pp", "dp_replicate", "dp_shard", "cp", "tp"]`` is the same, outermost first): TP
innermost, then CP, then DP, with PP outermost. The expert layers regroup a stage's
TP × CP × DP ranks as expert TP × EP × expert DP in that order. A group's members are
``stride`` ranks apart, which says whether it stays inside a node (what its collectives'
link class is) — both the NCCL-buffer row and the communication section read this one
list, so they cannot disagree about which groups exist.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, NamedTuple

from engine.ledger.placement import dense_dp_group
from engine.ledger.sharding import shard_group_size
from engine.plan import Plan
from engine.stacks.families import rule_of

GroupKind = Literal[
    "tp",
    "cp",
    "ep",
    "pp_prev",
    "pp_next",
    "dp",
    "dp_shard",
    "dp_replicate",
    "expert_dp",
    "expert_tp",
]


class Group(NamedTuple):
    """One process group: ``size`` ranks, consecutive members ``stride`` ranks apart.

    A named tuple, not a frozen dataclass: as immutable and several times cheaper to
    build (every stage of every layout a search estimates lists its groups)."""

    kind: GroupKind
    label: str  # how the NCCL row and the communication table name it
    size: int
    stride: int

    def inside_node(self, ranks_per_node: int) -> bool:
        """Whether all members sit on one node (a group of consecutive ranks that fits)."""
        return self.size * self.stride <= ranks_per_node


def ranks_per_node(plan: Plan) -> int:
    """Ranks placed on each node (``parallelism.ranks_per_node`` or the node's GPUs)."""
    return plan.parallelism.ranks_per_node or plan.hardware.gpus_per_node


def stage_groups(plan: Plan, stage: int) -> list[Group]:
    """The groups a rank of ``stage`` joins (size > 1 only), in the order the NCCL row
    lists them: TP, CP, EP, pipeline neighbours, data parallel, then the expert groups."""
    par = plan.parallelism
    tp, cp, dp = par.tp, par.cp, par.dp
    out: list[Group] = []
    if tp > 1:
        out.append(Group("tp", f"TP ({tp})", tp, 1))
    if cp > 1:
        out.append(Group("cp", f"CP ({cp})", cp, tp))
    if par.ep > 1:
        out.append(Group("ep", f"EP all-to-all ({par.ep})", par.ep, par.expert_tp))
    if par.pp > 1:
        pp_stride = tp * cp * dp
        if stage > 0:
            out.append(Group("pp_prev", "PP p2p (prev)", 2, pp_stride))
        if stage < par.pp - 1:
            out.append(Group("pp_next", "PP p2p (next)", 2, pp_stride))
    dense = dense_dp_group(par)
    if dense > 1:
        shard = shard_group_size(par, dense, ranks_per_node(plan))
        if rule_of(par.strategy).hybrid and 1 < shard < dense:
            out.append(Group("dp_shard", f"DP shard ({shard})", shard, tp))
            out.append(
                Group(
                    "dp_replicate", f"DP replicate ({dense // shard})", dense // shard, tp * shard
                )
            )
        else:
            out.append(Group("dp", f"DP ({dense})", dense, tp))
    etp, edp = par.expert_tp, par.expert_dp
    if plan.model.architecture.moe is not None and (par.ep > 1 or etp != tp):
        if etp > 1 and etp != tp:
            out.append(Group("expert_tp", f"expert TP ({etp})", etp, 1))
        if edp > 1 and edp != dense:
            out.append(Group("expert_dp", f"expert DP ({edp})", edp, etp * par.ep))
    return out


def group_of(groups: Sequence[Group], *kinds: GroupKind) -> Group | None:
    """The first group of one of these kinds, if the rank joins one."""
    return next((g for g in groups if g.kind in kinds), None)
