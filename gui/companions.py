"""Edits that bring their companions: a value that alone would leave the plan
uncomputable starts from a computable one, in the same undo step.

Kind = custom trains "a chosen subset", which the engine cannot size until the subset is
named (``method.custom`` roles or count): picking it made the plan uncomputable the
moment it was picked. It now starts from every parameter (the count of the whole model,
what full fine-tuning trains), so the estimate stays on screen and the user narrows it.
"""

from __future__ import annotations

from typing import Any

from engine.models.inventory import build_inventory, total_params
from engine.plan import Plan


def with_companions(plan: Plan, changes: dict[str, Any]) -> dict[str, Any]:
    """``changes`` with what keeps the plan computable added (never overriding them)."""
    out = dict(changes)
    custom = plan.method.custom
    if (
        out.get("method.kind") == "custom"
        and not custom.roles
        and custom.count is None
        and "method.custom.count" not in out
    ):
        out["method.custom.count"] = total_params(build_inventory(plan.model.architecture))
    return out
