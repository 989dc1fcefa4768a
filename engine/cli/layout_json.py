"""The stable JSON form of the GPU counts and the fit (``memplan layouts --json``).

Documented in the README next to the estimate's form, with the same promise: keys are
only ever added within one ``json_version``, byte values are integers.
"""

from __future__ import annotations

from typing import Any

from engine import __version__
from engine.analysis import FitLimits
from engine.cli.json_form import JSON_VERSION
from engine.layout import Count, GpuCounts
from engine.layout.levers import Lever
from engine.layout.proofs.evaluate import Outcome
from engine.layout.shapes import Lattice, Layout, Rejected
from engine.whatif.fit import FitResult


def layout_json(lay: Layout) -> dict[str, Any]:
    return {
        "label": lay.label(),
        "tp": lay.tp,
        "pp": lay.pp,
        "cp": lay.cp,
        "ep": lay.ep,
        "dp": lay.dp,
        "world_size": lay.world_size,
        "micro_batch": lay.micro_batch,
        "grad_accum": lay.grad_accum,
        "expert_tp": lay.etp,
        "pp_split": list(lay.pp_split) if lay.pp_split else None,
        "global_batch": lay.global_batch,
    }


def outcome_json(o: Outcome) -> dict[str, Any]:
    """A layout's estimated peak per rank (high decides fit) and its headroom."""
    if not o.ok:
        return {"layout": layout_json(o.layout), "error": o.error}
    return {
        "layout": layout_json(o.layout),
        "low_bytes": o.low,
        "high_bytes": o.high,
        "headroom_bytes": o.headroom,
        "fits_high": o.fits_high,
        "fits_low": o.fits_low,
        "node_problems": list(o.node_problems),
    }


def rejected_json(r: Rejected) -> dict[str, Any]:
    return {"layout": layout_json(r.layout), "reasons": list(r.reasons)}


def _count_json(c: Count) -> dict[str, Any]:
    return {
        "gpus": c.gpus,
        "layout": layout_json(c.layout) if c.layout else None,
        "reason": c.reason,
    }


def counts_json(config_hash: str, k: GpuCounts) -> dict[str, Any]:
    """The three counts with their reasons, the chosen layout, the ranked alternatives at
    the procurement size and every rejected layout with its reasons."""
    chosen = k.chosen
    return {
        "json_version": JSON_VERSION,
        "memplan_version": __version__,
        "config_hash": config_hash,
        "search": {
            "max_gpus": k.max_gpus,
            "gpus_per_node": k.gpus_per_node,
            "rounding": k.rounding,
            "limit_bytes": k.limit_bytes,
            "capacity_bytes": k.capacity_bytes,
            "estimates": k.estimates,
            "stopped_at_budget": k.stopped,
        },
        "plan_layout": outcome_json(k.plan_layout) if k.plan_layout else None,
        "arithmetic_min": _count_json(k.arithmetic_min),
        "first_layout": {**_count_json(k.first_layout), "nodes": k.nodes},
        "validation": {
            "low_gpus": k.validation_low.gpus,
            "high_gpus": k.validation_high.gpus,
            "straddles": k.straddles,
            "reason": k.validation_reason,
        },
        "chosen": outcome_json(chosen) if chosen else None,
        "alternatives": [outcome_json(o) for o in k.alternatives],
        "rejected": [rejected_json(r) for r in k.rejected],
        "rejection_summary": [
            {"reason": why, "layouts": n} for why, n in k.rejection_summary(top=10)
        ],
        "notes": list(k.notes),
    }


def lattice_json(config_hash: str, lattice: Lattice, outcomes: list[Outcome]) -> dict[str, Any]:
    """Every layout of one world size (``--gpus N``): the legal ones estimated, in
    preference order, and the rejected ones with their reasons."""
    return {
        "json_version": JSON_VERSION,
        "memplan_version": __version__,
        "config_hash": config_hash,
        "gpus": lattice.world_size,
        "legal": [outcome_json(o) for o in outcomes],
        "rejected": [rejected_json(r) for r in lattice.rejected],
    }


def _fit_result_json(r: FitResult) -> dict[str, Any]:
    return {
        "field": r.field,
        "value": r.value,
        "bound": r.bound,
        "bounded": r.bounded,
        "reason": r.reason,
        "searched": r.searched,
    }


def fit_json(fit: FitLimits) -> dict[str, Any]:
    """What fits the plan's own layout (``--fit``)."""
    return {
        "layout": layout_json(fit.layout),
        "micro_batch": _fit_result_json(fit.micro_batch),
        "seq_len": _fit_result_json(fit.sequence),
    }


def levers_json(levers: tuple[Lever, ...]) -> list[dict[str, Any]]:
    """The fit levers (never applied): the change, its cost in words, and the counts."""
    out = []
    for lv in levers:
        c = lv.counts
        out.append(
            {
                "name": lv.name,
                "changes": {k: v for k, v in lv.changes},
                "cost": lv.cost,
                "error": lv.cannot_run,
                "first_layout": {**_count_json(c.first_layout), "nodes": c.nodes} if c else None,
                "arithmetic_min": _count_json(c.arithmetic_min) if c else None,
            }
        )
    return out
