"""Offload: move persistent rows from HBM to host RAM or NVMe, per rank.

Offload changes where bytes live, never how fast a step runs. Each moved row keeps its
per-rank bytes (converted where the host copy has another dtype, e.g. ZeRO-Offload's
fp32 gradient partition) and says whether it is pinned, because pinned (page-locked)
memory cannot be swapped and is limited by ``ulimit -l``.
"""

from __future__ import annotations

from dataclasses import replace

from engine.ledger.row import Location, Row
from engine.ledger.states.offload_rules import DEEPSPEED, FSDP
from engine.plan import Plan
from engine.units import fmt_count

GROUP_PINNED = "offload (pinned)"
GROUP_PAGEABLE = "offload"


def _move(
    row: Row,
    location: Location,
    pinned: bool,
    factor_num: int = 1,
    factor_den: int = 1,
    why: str = "",
    source: str | None = None,
) -> Row:
    n = row.high * factor_num // factor_den
    conv = f" × {factor_num}/{factor_den}" if (factor_num, factor_den) != (1, 1) else ""
    return replace(
        row,
        id=f"{location}.offload.{row.id.removeprefix('hbm.')}",
        label=f"{row.label} — offloaded{' (pinned)' if pinned else ''}",
        location=location,
        low=n,
        high=n,
        group=GROUP_PINNED if pinned else GROUP_PAGEABLE,
        formula=f"per rank: {fmt_count(row.high)} B{conv} moved from HBM{why} = {fmt_count(n)} B",
        source=source or row.source,
    )


def _is_weights(r: Row) -> bool:
    return r.id.startswith("hbm.weights")


def _is_optimizer(r: Row) -> bool:
    return r.id == "hbm.master_weights" or r.id.startswith("hbm.optimizer.")


def split_offload(rows: list[Row], plan: Plan) -> tuple[list[Row], list[Row]]:
    """(rows that stay in HBM, per-rank rows moved to host or NVMe)."""
    off, strategy = plan.offload, plan.parallelism.strategy
    if off.optimizer == "none" and off.params == "none":
        return rows, []
    pin = off.pin_memory
    stay: list[Row] = []
    moved: list[Row] = []
    if strategy in FSDP:  # CPUOffload / CPUOffloadPolicy: all states on the CPU
        for r in rows:
            if _is_weights(r):
                moved.append(
                    _move(r, "host", pin, why=" (sharded parameters)", source="fsdp-cpu-offload")
                )
            else:
                moved.append(_move(r, "host", False, source="fsdp-cpu-offload"))
        return stay, moved
    opt_loc: Location = "nvme" if off.optimizer == "nvme" else "host"
    for r in rows:
        if _is_optimizer(r) and off.optimizer != "none":
            moved.append(_move(r, opt_loc, False, source="deepspeed-offload"))
        elif (
            r.id == "hbm.grads"
            and off.optimizer != "none"
            and strategy in DEEPSPEED
            and strategy != "zero1"
        ):
            # ZeRO-Offload reduces 16-bit gradients into a pinned fp32 host partition.
            bpe = 4 if r.dtype == "fp32" else 2
            moved.append(
                _move(
                    r, "host", pin, 4, bpe, " as the fp32 gradient partition", "deepspeed-offload"
                )
            )
        elif _is_weights(r) and off.params != "none":
            loc: Location = "nvme" if off.params == "nvme" else "host"
            moved.append(_move(r, loc, pin and loc == "host", source="deepspeed-offload"))
        else:
            stay.append(r)
    return stay, moved
