"""Offload: move persistent rows from HBM to host RAM or NVMe, per rank.

Offload changes where bytes live, never how fast a step runs. Each moved row keeps its
per-rank bytes (converted where the host copy has another dtype, e.g. ZeRO-Offload's
fp32 gradient partition) and says whether it is pinned, because pinned (page-locked)
memory cannot be swapped and is limited by ``ulimit -l``. A moved row keeps its state
and gets the id ``{location}.offload.{the HBM id without "hbm."}``.
"""

from __future__ import annotations

from typing import Literal

from engine.ledger.row import Location, Row, State
from engine.plan import Plan
from engine.stacks.families import rule_of
from engine.units import fmt_count

GROUP_PINNED = "offload (pinned)"
GROUP_PAGEABLE = "offload"

OffloadClass = Literal["params", "grads", "optimizer"]
OFFLOAD_CLASS: dict[State, OffloadClass] = {
    "weights": "params",
    "grads": "grads",
    "master": "optimizer",
    "optimizer": "optimizer",
}
"""What each persistent state moves with: DeepSpeed's ``offload_param`` moves the
parameters, ``offload_optimizer`` the master copy and optimizer state (and, from ZeRO-2,
the gradient partition); FSDP's CPU offload moves all of them."""


def offload_group(pinned: bool) -> str:
    """The chart group of host memory: pinned or pageable."""
    return GROUP_PINNED if pinned else GROUP_PAGEABLE


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
    return row._replace(
        id=f"{location}.offload.{row.id.removeprefix('hbm.')}",
        label=f"{row.label} — offloaded{' (pinned)' if pinned else ''}",
        location=location,
        low=n,
        high=n,
        group=offload_group(pinned),
        pinned=pinned,
        formula=f"per rank: {fmt_count(row.high)} B{conv} moved from HBM{why} = {fmt_count(n)} B",
        source=source or row.source,
    )


def split_offload(rows: list[Row], plan: Plan) -> tuple[list[Row], list[Row]]:
    """(rows that stay in HBM, per-rank rows moved to host or NVMe)."""
    off, rule = plan.offload, rule_of(plan.parallelism.strategy)
    if off.optimizer == "none" and off.params == "none":
        return rows, []
    pin = off.pin_memory
    stay: list[Row] = []
    moved: list[Row] = []
    opt_loc: Location = "nvme" if off.optimizer == "nvme" else "host"
    for r in rows:
        cls = OFFLOAD_CLASS.get(r.state)
        if cls is None:
            stay.append(r)
        elif rule.fsdp:  # CPUOffload / CPUOffloadPolicy: all states on the CPU
            if cls == "params":
                why = " (sharded parameters)"
                moved.append(_move(r, "host", pin, why=why, source="fsdp-cpu-offload"))
            else:
                moved.append(_move(r, "host", False, source="fsdp-cpu-offload"))
        elif cls == "optimizer" and off.optimizer != "none":
            moved.append(_move(r, opt_loc, False, source="deepspeed-offload"))
        elif (
            cls == "grads" and off.optimizer != "none" and rule.family == "deepspeed" and rule.grads
        ):
            # ZeRO-Offload reduces 16-bit gradients into a pinned fp32 host partition.
            bpe = 4 if r.dtype == "fp32" else 2
            moved.append(
                _move(
                    r, "host", pin, 4, bpe, " as the fp32 gradient partition", "deepspeed-offload"
                )
            )
        elif cls == "params" and off.params != "none":
            loc: Location = "nvme" if off.params == "nvme" else "host"
            moved.append(_move(r, loc, pin and loc == "host", source="deepspeed-offload"))
        else:
            stay.append(r)
    return stay, moved
