"""A persistent row moved off the GPU: its new id, location, bytes and pinning.

Pinned (page-locked) host memory cannot be swapped and is limited by ``ulimit -l``, so
every host row says whether it is pinned, and the chart groups it apart.
"""

from __future__ import annotations

from typing import Literal

from engine.ledger.row import Location, Row, State
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
parameters, ``offload_optimizer`` the master copy and optimizer state (and the gradient
partition); FSDP's CPU offload moves all of them."""


def offload_group(pinned: bool) -> str:
    """The chart group of host memory: pinned or pageable."""
    return GROUP_PINNED if pinned else GROUP_PAGEABLE


def move(
    row: Row,
    location: Location,
    pinned: bool,
    factor_num: int = 1,
    factor_den: int = 1,
    why: str = "",
    source: str | None = None,
) -> Row:
    """``row`` moved off the GPU (its bytes × factor_num / factor_den)."""
    n = row.high * factor_num // factor_den
    conv = f" × {factor_num}/{factor_den}" if (factor_num, factor_den) != (1, 1) else ""
    pinned = pinned and location == "host"
    return row._replace(
        id=f"{location}.offload.{row.id.removeprefix('hbm.')}",
        label=f"{row.label} — offloaded{' (pinned)' if pinned else ''}",
        location=location,
        low=n,
        high=n,
        group=offload_group(pinned),
        pinned=pinned,
        formula_src=f"per rank: {fmt_count(row.high)} B{conv} moved from HBM{why} = "
        f"{fmt_count(n)} B",
        source=source or row.source,
    )
