"""Helpers for ledger tests: build plans and read rows by id.

A plain module rather than a conftest, so that `from ledger_plans import ...` cannot
resolve to another folder's conftest when the whole suite runs."""

from __future__ import annotations

from typing import Any

from engine.estimate import estimate
from engine.plan import Plan, default_plan, with_values

SMOL = {
    "family": "llama",
    "hidden": 576,
    "layers": 30,
    "heads": 9,
    "kv_heads": 3,
    "intermediate": 1536,
    "vocab": 49152,
    "tied_embeddings": True,
}
"""SmolLM-135M's architecture (134,515,008 parameters)."""

TINY_MOE: dict[str, Any] = {
    "family": "mixtral",
    "hidden": 8,
    "layers": 2,
    "heads": 2,
    "kv_heads": 2,
    "intermediate": 16,
    "vocab": 32,
    "tied_embeddings": True,
    "moe": {"num_experts": 4, "top_k": 1, "expert_intermediate": 16},
}
"""A two-layer, four-expert Mixtral small enough to count every sharded element by hand."""


def make_plan(**changes: Any) -> Plan:
    """The default plan with dotted-path changes (``__`` stands for ``.``)."""
    return with_values(default_plan(), {k.replace("__", "."): v for k, v in changes.items()})


STATE_GROUPS = ("weights", "gradients", "optimizer")


def rows_of(plan: Plan, stage: int | None = None) -> dict[str, int]:
    """Model-state row id → high bytes for the heaviest stage (or a given stage):
    the persistent weights, gradients and optimizer rows these tests derive."""
    est = estimate(plan)
    st = est.heaviest if stage is None else est.stages[stage]
    return {r.id: r.high for r in st.rows if r.kind == "persistent" and r.group in STATE_GROUPS}


def hbm_persistent(plan: Plan, stage: int | None = None) -> int:
    """Sum of the persistent model-state rows in HBM."""
    est = estimate(plan)
    st = est.heaviest if stage is None else est.stages[stage]
    return sum(
        r.high
        for r in st.rows
        if r.location == "hbm" and r.kind == "persistent" and r.group in STATE_GROUPS
    )
