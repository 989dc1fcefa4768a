"""Which plan a record measured: the config hash, and the workload hash.

Calibration edits the plan's uncertain runtime ranges, which changes its config hash;
the run it was calibrated from still measured the same workload. The workload hash is
the SHA-256 of the canonical plan with exactly the calibrated fields removed, so a
record matches a calibrated descendant of its plan — and nothing else — without a
warning.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from engine.plan import Plan

CALIBRATED_FIELDS: tuple[str, ...] = (
    "runtime.allocator_reserve",
    "runtime.activation_band",
    "runtime.cuda_context_bytes",
    "runtime.nccl_bytes_per_communicator",
    "runtime.cublas_workspace_bytes",
)
"""The fields ``calibrate.py`` may edit (kept here so the two never disagree)."""


def workload_hash(plan: Plan) -> str:
    """SHA-256 of the plan's canonical JSON without :data:`CALIBRATED_FIELDS`."""
    tree: dict[str, Any] = plan.model_dump(mode="json")
    for path in CALIBRATED_FIELDS:
        *parents, leaf = path.split(".")
        node: Any = tree
        for key in parents:
            node = node[key]
        node.pop(leaf, None)
    text = json.dumps(tree, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()
