"""The checkpoint-save event: what saving costs on the GPU and in host RAM.

A sharded (distributed) checkpoint writes each rank's own shard: nothing is gathered,
and with host staging (async save) each rank stages its shard in host RAM. A full state
dict consolidated on rank 0 gathers the whole model (and optimizer state, if saved) on
one rank — on its GPU when staged there, otherwise unit by unit into host RAM;
consolidating on every rank costs the full state on every rank (memory-model §7).
"""

from __future__ import annotations

from engine.ledger.precision import StateFormats
from engine.ledger.row import Location, Phase, Row
from engine.models.inventory import Tensor
from engine.plan import Plan
from engine.units import fmt_count

CKPT: frozenset[Phase] = frozenset({"checkpoint"})
ADAM_STATES = 2


def full_state_bytes(
    plan: Plan, tensors: tuple[Tensor, ...], formats: StateFormats
) -> tuple[int, str]:
    """Bytes of the consolidated state dict: parameters, plus optimizer moments."""
    n = sum(t.numel for t in tensors)
    params = n * formats.param_bytes
    ck = plan.checkpoint
    if not ck.include_optimizer or plan.method.kind != "full":
        return params, f"{fmt_count(n)} params × {formats.param_bytes} B"
    states = ADAM_STATES if plan.method.optimizer.name in ("adamw", "adam8bit") else 1
    opt = n * states * formats.optimizer_bytes
    master = n * formats.master_bytes
    return params + opt + master, (
        f"{fmt_count(n)} params × ({formats.param_bytes} + {states}×{formats.optimizer_bytes}"
        + (f" + {formats.master_bytes} master" if master else "")
        + ") B"
    )


def checkpoint_rows(
    plan: Plan,
    tensors: tuple[Tensor, ...],
    formats: StateFormats,
    rank_state_bytes: int,
    largest_unit_bytes: int,
) -> list[Row]:
    """GPU and host rows of the checkpoint phase for one rank."""
    ck = plan.checkpoint
    full, formula = full_state_bytes(plan, tensors, formats)
    rows: list[Row] = []

    def row(id_: str, label: str, loc: Location, low: int, high: int, f: str) -> Row:
        return Row(
            id=id_,
            label=label,
            location=loc,
            kind="peak",
            group="checkpoint",
            low=low,
            high=high,
            formula=f,
            source="torch-distributed-checkpoint",
            phases=CKPT,
        )

    if ck.format == "sharded":
        rows.append(
            row(
                "host.checkpoint.staging",
                "Checkpoint staging (own shard)",
                "host",
                0,
                rank_state_bytes,
                f"0 (synchronous) to the rank's own state {fmt_count(rank_state_bytes)} B "
                "(async save stages a host copy)",
            )
        )
        return rows
    if ck.staging == "gpu":
        rows.append(
            row(
                "hbm.checkpoint.gathered",
                "Full state dict gathered on the GPU",
                "hbm",
                full,
                full,
                f"{formula} = {fmt_count(full)} B on rank 0",
            )
        )
    else:
        rows.append(
            row(
                "hbm.checkpoint.gathered",
                "One unit gathered on its way to host",
                "hbm",
                largest_unit_bytes,
                largest_unit_bytes,
                f"largest unit {fmt_count(largest_unit_bytes)} B (offload_to_cpu)",
            )
        )
        rows.append(
            row(
                "host.checkpoint.full_state",
                "Full state dict in host RAM",
                "host",
                full,
                full,
                f"{formula} = {fmt_count(full)} B"
                + (" on every rank" if ck.format == "consolidated_every_rank" else " on rank 0"),
            )
        )
    return rows
