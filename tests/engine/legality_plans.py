"""Tiny plans for the legality tests: an estimate of them costs nothing."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from engine.layout.shapes import LayoutPreferences
from engine.plan import Plan, default_plan, with_values

TINY = {
    "family": "llama",
    "hidden": 64,
    "layers": 2,
    "heads": 4,
    "kv_heads": 2,
    "intermediate": 128,
    "vocab": 100,
}
MOE = {"num_experts": 4, "top_k": 2, "expert_intermediate": 32}
NO_PREFERENCES = LayoutPreferences.hard_rules_only()
"""Only the hard rules: what legality alone admits."""


def tiny_changes(arch: dict[str, Any] | None = None, **changes: Any) -> dict[str, Any]:
    return {
        "model.architecture": {**TINY, **(arch or {})},
        "batch.seq_len": 4,
        "hardware.gpus_per_node": 4,
        "parallelism.dp": 1,
        **{k.replace("__", "."): v for k, v in changes.items()},
    }


def tiny(arch: dict[str, Any] | None = None, **changes: Any) -> Plan:
    return with_values(default_plan(), tiny_changes(arch, **changes))


def unchecked(plan: Plan, changes: dict[str, Any]) -> Plan:
    """``plan`` with ``changes`` applied by ``model_copy``, so no validator runs: how the
    layout search derives its candidate plans, and how a load-time rule reaches
    estimate() and the lattice at all."""

    def put(model: BaseModel, path: list[str], value: Any) -> BaseModel:
        head, *rest = path
        new = put(getattr(model, head), rest, value) if rest else value
        return model.model_copy(update={head: new})

    for path, value in changes.items():
        plan = put(plan, path.split("."), value)  # type: ignore[assignment]
    return plan
