""".memplan schema migrations that change the plan itself (``engine.planfile`` chains
them; this module only rewrites plain JSON).

Schema 2 made the training stack an input (``plan.stack``): fields whose default now
follows the stack became ``auto`` (``None`` for the NCCL band), and two runtime bands
were widened to what their sources report. A schema-1 file that left such a field out
meant the schema-1 default, so the migration writes that value in explicitly — the
plan keeps its meaning (and its bytes) instead of silently taking a stack's default.
``runtime.framework`` was informational and is dropped; the stack becomes ``auto``,
which with every stack-decided field explicit decides nothing.

Schema 2 also folds EP over TP × CP × DP (Megatron-Core's MoE parallel folding): schema 1
counted world = TP × PP × CP × EP × DP with DP × EP replicas, so the migration writes DP
as DP × EP (same world size, replicas and global batch).
"""

from __future__ import annotations

import copy
from typing import Any

V1_DEFAULTS: tuple[tuple[str, Any], ...] = (
    ("method.precision.policy", "autocast"),
    ("method.precision.grad_dtype", "fp32"),
    ("method.optimizer.implementation", "foreach"),
    ("method.recompute.policy", "none"),
    ("host.model_init", "meta"),
    ("runtime.activation_profile", "hf-transformers"),
    ("runtime.nccl_bytes_per_communicator", {"low": 500_000_000, "high": 700_000_000}),
    ("runtime.allocator_reserve", {"low": 0.05, "high": 0.2}),
    ("parallelism.tp_style", "vocab_parallel"),
    ("parallelism.pp_split_policy", "even"),
)
"""Schema-1 defaults of every field whose default schema 2 changed. ``tp_style`` did not
exist: schema-1 estimates split the vocabulary across TP (the roles table), which is
``vocab_parallel``; neither did ``pp_split_policy``: schema 1 put a PP's remainder layers
on the earliest stages, which is ``even``."""


LATE_SECTIONS: tuple[str, ...] = ("workload", "acceptance")
"""Plan sections that joined schema 2 after its first files were written (the stack came
first). A file without one predates it and meant its defaults — every sample padded to
the sequence length, eager mode, the strictest acceptance thresholds — which is what its
estimates computed, so an empty section (all defaults) keeps the plan's meaning."""


def fill_late_sections(plan: dict[str, Any]) -> None:
    """Give a schema-1 or early schema-2 ``plan`` object the sections it predates."""
    for section in LATE_SECTIONS:
        plan.setdefault(section, {})


def _fill(tree: dict[str, Any], path: str, value: Any) -> None:
    *parents, leaf = path.split(".")
    node = tree
    for key in parents:
        child = node.get(key)
        if not isinstance(child, dict):
            if key in node:  # not an object: leave it for validation to report
                return
            child = node[key] = {}
        node = child
    node.setdefault(leaf, copy.deepcopy(value))


def _fold_ep_into_dp(parallelism: dict[str, Any]) -> None:
    """A schema-1 ``parallelism`` object rewritten in place for MoE folding: DP becomes
    DP × EP (schema 1's defaults: ep 1, dp 8). A value of the wrong type is left for
    validation to report."""
    ep, dp = parallelism.get("ep", 1), parallelism.get("dp", 8)
    if type(ep) is int and type(dp) is int and ep > 1:
        parallelism["dp"] = dp * ep


def migrate_plan_1_to_2(plan: dict[str, Any]) -> dict[str, Any]:
    """A schema-1 ``plan`` object as schema 2 means the same thing."""
    out = copy.deepcopy(plan)
    parallelism = out.get("parallelism")
    if isinstance(parallelism, dict):
        _fold_ep_into_dp(parallelism)
    runtime = out.get("runtime")
    if isinstance(runtime, dict):
        runtime.pop("framework", None)
    for path, value in V1_DEFAULTS:
        section = path.split(".", 1)[0]
        if isinstance(out.get(section), dict):
            _fill(out, path, value)
    out.setdefault("stack", {"name": "auto"})
    fill_late_sections(out)
    return out


V2_DEFAULTS: tuple[tuple[str, Any], ...] = (
    ("runtime.reserve_model", "fraction"),
    ("runtime.expandable_segments", False),
    ("policy.headroom_percent", 10.0),
)
"""Schema-2 defaults of every field whose default schema 3 changed: schema 3 works the
allocator reserve out from the caching allocator's rules (a schema-2 plan took a share of
the whole peak, ``runtime.allocator_reserve``, and counted all of it toward fit), lets
the stack decide ``expandable_segments`` (schema 2: off) and keeps no headroom by default
(schema 2: 10 %)."""


def migrate_plan_2_to_3(plan: dict[str, Any]) -> dict[str, Any]:
    """A schema-2 ``plan`` object as schema 3 means the same thing: each field schema 3
    gave a new default is written in with its schema-2 default where the file left it
    out (a section of the wrong type is left for validation to report)."""
    out = copy.deepcopy(plan)
    for path, value in V2_DEFAULTS:
        section = path.split(".", 1)[0]
        if isinstance(out.setdefault(section, {}), dict):
            _fill(out, path, value)
    return out
