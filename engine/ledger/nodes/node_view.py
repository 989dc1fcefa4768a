"""How ranks map onto nodes, and what one rank holds, for the per-node ledgers."""

from __future__ import annotations

from dataclasses import dataclass

from engine.ledger.row import Row
from engine.ledger.states.offload import offloads_nothing
from engine.ledger.states.persistent import offloaded_stage_rows, stage_shard_elems
from engine.plan import Plan
from engine.units import ceil_div


@dataclass(frozen=True, slots=True)
class NodeView:
    """The busiest node: its ranks, and the per-rank facts host rows scale."""

    ranks_per_node: int  # ranks on the busiest node
    nodes: int
    stage: int  # the stage whose ranks offload the most (they decide host RAM)
    offloaded: tuple[Row, ...]  # per-rank rows moved off the GPU
    trainable_shard_elems: int  # trainable elements one rank's optimizer shard covers
    param_shard_elems: int  # parameter elements one rank holds (its partition)


def node_view(plan: Plan) -> NodeView:
    par = plan.parallelism
    per_node = min(par.ranks_per_node or plan.hardware.gpus_per_node, par.world_size)
    # Nothing offloaded: every stage moves nothing, and the first stage decides.
    stages = range(1) if offloads_nothing(plan) else range(par.pp)
    moved = {s: offloaded_stage_rows(plan, s) for s in stages}
    stage = max(stages, key=lambda s: (sum(r.high for r in moved[s]), -s))
    opt, params = stage_shard_elems(plan, stage)
    return NodeView(
        per_node, ceil_div(par.world_size, per_node), stage, tuple(moved[stage]), opt, params
    )
