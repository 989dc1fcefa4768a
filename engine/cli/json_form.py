"""The stable JSON form of an Estimate (``memplan estimate --json``).

Documented in the README. Keys are only ever added, never renamed or removed, within
one ``json_version``; byte values are integers, never floats.
"""

from __future__ import annotations

from typing import Any

from engine import FORMULA_VERSION, __version__
from engine.estimate import Estimate, Range, StageEstimate
from engine.ledger.nodes.communication import Communication
from engine.ledger.nodes.ledgers import NodeLedgers
from engine.ledger.row import LOCATIONS, PHASES, Row
from engine.planfile import SCHEMA_VERSION

JSON_VERSION = 1


def _range(r: Range) -> dict[str, int]:
    return {"low_bytes": r.low, "high_bytes": r.high}


def row_json(r: Row) -> dict[str, Any]:
    return {
        "id": r.id,
        "label": r.label,
        "location": r.location,
        "kind": r.kind,
        "group": r.group,
        "phases": [p for p in PHASES if p in r.phases],
        "scope": r.scope,
        "dtype": r.dtype,
        "low_bytes": r.low,
        "high_bytes": r.high,
        "formula": r.formula,
        "source": r.source,
    }


def stage_json(s: StageEstimate) -> dict[str, Any]:
    return {
        "stage": s.stage,
        "layers": [s.layers.start, s.layers.stop],
        "peak_phase": s.peak_phase,
        "peak": _range(s.peak),
        "phases": {p: _range(s.phases[p]) for p in PHASES},
        "reserved_phases": {p: _range(r) for p, r in s.reserved_phases.items()},
        "moments": {m: _range(r) for m, r in s.moments.items()},
        "reserved_peak": _range(s.reserved_peak),
        "device_peak": _range(s.device_peak),
        "totals": {loc: _range(s.location_total(loc)) for loc in LOCATIONS},
        "rows": [row_json(r) for r in s.rows],
    }


def estimate_json(est: Estimate, include_stages: bool = False) -> dict[str, Any]:
    """The documented ``--json`` object."""
    heavy = est.heaviest
    out: dict[str, Any] = {
        "json_version": JSON_VERSION,
        "memplan_version": __version__,
        "schema_version": SCHEMA_VERSION,
        "formula_version": FORMULA_VERSION,
        "config_hash": est.config_hash,
        "world_size": est.world_size,
        "heaviest_stage": est.heaviest_stage,
        "rows": [row_json(r) for r in heavy.rows],
        "totals": {loc: _range(heavy.location_total(loc)) for loc in LOCATIONS},
        "phases": {p: _range(heavy.phases[p]) for p in PHASES},
        "peak": {"phase": heavy.peak_phase, **_range(heavy.peak)},
        "reserved_phases": {p: _range(r) for p, r in heavy.reserved_phases.items()},
        "moments": {m: _range(r) for m, r in heavy.moments.items()},
        "reserved_peak": _range(heavy.reserved_peak),
        "device_peak": _range(heavy.device_peak),
        "fit_peak": _range(heavy.fit_peak),
        "fit": {
            "verdict": est.verdict,
            "reason": est.verdict_reason,
            "decided_by": est.decided_by,
            "capacity_bytes": est.capacity_bytes,
            "limit_bytes": est.limit_bytes,
        },
        "notes": list(est.notes),
    }
    out["nodes"] = nodes_json(est.nodes)
    b = est.batch
    out["tokens_per_step"] = b.tokens_per_step
    out["batch"] = {
        "micro_batch": b.micro_batch,
        "grad_accum": b.grad_accum,
        "dp": b.dp,
        "global_batch": b.global_batch,
        "seq_len": b.seq_len,
        "tokens_per_step": b.tokens_per_step,
        "identity": b.identity(),
    }
    if est.nodes.communication is not None:
        out["communication"] = communication_json(est.nodes.communication)
    if include_stages:
        out["stages"] = [stage_json(s) for s in est.stages]
    return out


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


def communication_json(c: Communication) -> dict[str, Any]:
    """The step's collectives for one rank of the busiest stage; seconds are floors."""
    return {
        "stage": c.stage,
        "transfers": [
            {
                "what": t.what,
                "collective": t.collective,
                "group": t.group,
                "size_bytes": t.size,
                "times": t.times,
                "intra_node_bytes": t.intra,
                "inter_node_bytes": t.inter,
                "formula": t.formula,
                "source": t.source,
            }
            for t in c.transfers
        ],
        "intra_node_bytes": c.intra_bytes,
        "inter_node_bytes": c.inter_bytes,
        "intra_node_gbps": c.intra_gbps,
        "inter_node_gbps": c.inter_gbps,
        "intra_node_seconds": c.intra_seconds,
        "inter_node_seconds": c.inter_seconds,
        "floor_seconds": c.floor_seconds,
        "note": "a lower bound: bytes over peak link bandwidth, links overlapping, no "
        "latency — never a throughput promise",
    }
