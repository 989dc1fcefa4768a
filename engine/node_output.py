"""Text and JSON for the host-RAM, NVMe and checkpoint ledgers."""

from __future__ import annotations

from typing import Any

from engine.estimate_json import row_json
from engine.ledger.row import Row
from engine.node_ledgers import NodeLedgers
from engine.units import UnitChoice, fmt_bytes, fmt_range


def _lines(title: str, rows: tuple[Row, ...], units: UnitChoice) -> list[str]:
    out = [title]
    if not rows:
        return [*out, "  (none)"]
    width = max(len(r.id) for r in rows)
    out += [f"  {r.id:<{width}}  {fmt_range(r.low, r.high, units)}" for r in rows]
    return out


def render_nodes(n: NodeLedgers, units: UnitChoice) -> str:
    """The three non-HBM ledgers, per node and per rank, with their fit."""
    r = n.view.ranks_per_node
    hl, hh = n.host_peak
    nl, nh = n.nvme_peak
    cl, ch = n.checkpoint_peak
    out = _lines(
        f"Host RAM per node ({r} ranks on the busiest of {n.view.nodes} node(s)):", n.host, units
    )
    out += [
        f"  peak per node {fmt_range(hl, hh, units)} of {fmt_bytes(n.host_capacity, units)};"
        f" per rank share {fmt_range(hl // r, hh // r, units)}; pinned "
        f"{fmt_bytes(n.pinned, units)}",
        "",
    ]
    out += _lines("NVMe per node:", n.nvme, units)
    out += [
        f"  peak per node {fmt_range(nl, nh, units)} of "
        f"{fmt_bytes(n.nvme_capacity, units)}; per rank share "
        f"{fmt_range(nl // r, nh // r, units)}",
        "",
    ]
    out += _lines("Checkpoint storage (shared file system, whole job):", n.checkpoint, units)
    out += [f"  peak while saving {fmt_range(cl, ch, units)}", ""]
    t = n.transfers
    out.append(f"Offload traffic per step: {t.verdict}")
    out += [f"  {line}" for line in t.lines]
    if t.device_host_seconds is not None:
        out.append(f"  device↔host lower bound {t.device_host_seconds:.3f} s per step")
    if t.host_nvme_seconds is not None:
        out.append(f"  host↔NVMe lower bound {t.host_nvme_seconds:.3f} s per step")
    return "\n".join(out)


def nodes_json(n: NodeLedgers) -> dict[str, Any]:
    def peak(p: tuple[int, int]) -> dict[str, int]:
        return {"low_bytes": p[0], "high_bytes": p[1]}

    t = n.transfers
    return {
        "ranks_per_node": n.view.ranks_per_node,
        "nodes": n.view.nodes,
        "host": {
            "rows": [row_json(r) for r in n.host],
            "peak_per_node": peak(n.host_peak),
            "capacity_per_node_bytes": n.host_capacity,
            "pinned_bytes": n.pinned,
        },
        "nvme": {
            "rows": [row_json(r) for r in n.nvme],
            "peak_per_node": peak(n.nvme_peak),
            "capacity_per_node_bytes": n.nvme_capacity,
        },
        "checkpoint": {
            "rows": [row_json(r) for r in n.checkpoint],
            "peak": peak(n.checkpoint_peak),
        },
        "transfers": {
            "device_host_bytes_per_rank": t.device_host_bytes_per_rank,
            "host_nvme_bytes_per_node": t.host_nvme_bytes_per_node,
            "device_host_seconds": t.device_host_seconds,
            "host_nvme_seconds": t.host_nvme_seconds,
            "verdict": t.verdict,
        },
    }
