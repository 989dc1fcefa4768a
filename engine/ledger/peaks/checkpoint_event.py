"""The checkpoint-save event on the GPU.

A sharded (distributed) checkpoint writes each rank's own shard: nothing is gathered on
the GPU. A full state dict consolidated on rank 0 gathers the whole checkpoint on one
rank — on its GPU when staged there, otherwise one unit at a time on its way to host
RAM (memory-model §7). The host side of the same event is in the node's host ledger
(:mod:`engine.ledger.nodes.host`), and the checkpoint's size comes from
:func:`engine.ledger.nodes.checkpoint_storage.checkpoint_size`, so the three never disagree.
"""

from __future__ import annotations

from engine.ledger.nodes.checkpoint_storage import checkpoint_size
from engine.ledger.row import CHECKPOINT, Row, make_row
from engine.plan import Plan
from engine.units import fmt_count


def checkpoint_rows(plan: Plan, largest_unit_bytes: int) -> list[Row]:
    """GPU rows of the checkpoint phase for one rank (rank 0 when consolidating)."""
    ck = plan.checkpoint
    if ck.format == "sharded":
        return []
    if ck.staging == "gpu":
        full = checkpoint_size(plan).total
        n, label = full, "Full state dict gathered on the GPU"
        formula = f"the whole checkpoint ({fmt_count(full)} B) assembled on rank 0's GPU"
    else:
        n, label = largest_unit_bytes, "One unit gathered on its way to host"
        formula = (
            f"largest gathered unit {fmt_count(largest_unit_bytes)} B, copied to host "
            "RAM unit by unit (offload_to_cpu)"
        )
    return [
        make_row(
            id="hbm.checkpoint.gathered",
            label=label,
            state="checkpoint",
            location="hbm",
            kind="peak",
            group="checkpoint",
            low=n,
            high=n,
            formula=formula,
            source="torch-dcp",
            phases=CHECKPOINT,
        )
    ]
