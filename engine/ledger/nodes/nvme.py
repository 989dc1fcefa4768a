"""NVMe per node: ZeRO-Infinity's offloaded state and checkpoints kept on local disks."""

from __future__ import annotations

from engine.ledger.nodes.checkpoint_storage import checkpoint_size
from engine.ledger.nodes.host import per_node
from engine.ledger.nodes.node_view import NodeView
from engine.ledger.row import CHECKPOINT, Row, make_row
from engine.plan import Plan
from engine.units import fmt_count


def nvme_rows(plan: Plan, v: NodeView) -> list[Row]:
    """The NVMe ledger of the busiest node."""
    rows = [per_node(row, v.ranks_per_node) for row in v.offloaded if row.location == "nvme"]
    ck = plan.checkpoint
    if ck.location != "local_nvme":
        return rows
    size = checkpoint_size(plan).total
    world, r = plan.parallelism.world_size, v.ranks_per_node
    share = size if ck.format == "consolidated_rank0" else size * r // world
    if ck.format == "consolidated_every_rank":
        share = size * r
    words = {
        "sharded": f"this node's {r}/{world} shard of {fmt_count(size)} B",
        "consolidated_rank0": f"the full checkpoint on node 0: {fmt_count(size)} B",
        "consolidated_every_rank": f"{r} ranks × full {fmt_count(size)} B",
    }[ck.format]
    kept = share * ck.retention
    rows.append(
        make_row(
            id="nvme.checkpoints.retained",
            state="checkpoint",
            label="Checkpoints kept on local NVMe",
            location="nvme",
            kind="persistent",
            group="checkpoint",
            low=kept,
            high=kept,
            formula=f"{ck.retention} kept × {words} = {fmt_count(kept)} B",
            source="torch-dcp",
            scope="node",
        )
    )
    rows.append(
        make_row(
            id="nvme.checkpoints.in_flight",
            state="checkpoint",
            label="Checkpoint being written",
            location="nvme",
            kind="peak",
            group="checkpoint",
            low=share,
            high=share,
            formula=f"one more while saving: {words}",
            source="torch-dcp",
            phases=CHECKPOINT,
            scope="node",
        )
    )
    return rows
