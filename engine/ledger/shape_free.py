"""The plan without its micro-batch's shape, for rows that do not depend on it.

Most of a rank's ledger never reads the micro-batch's size, its sequence length, the
global batch or which of them is held: the states, gathered units, buckets, optimizer
temporaries, checkpoint and runtime rows of a stage
(:mod:`engine.ledger.stage_rows`), and the host, NVMe, checkpoint-storage and transfer
ledgers of a node (:mod:`engine.ledger.nodes.ledgers`). Built from :func:`shape_free` —
and cached on it —, they are shared by plans that differ only in that shape: the
window's batch edits, the fit search over micro-batch sizes and sequence lengths, a
plan estimated again. Built from that plan rather than merely keyed on it, a row that
did read the shape would be wrong at once, in every golden plan, not only on a cache
hit. Gradient accumulation is kept: buckets, backward gradients and transfers read it.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from engine.plan import Plan

FIXED_SHAPE: dict[str, Any] = {
    "micro_batch": 1,
    "seq_len": 1,
    "global_batch": None,
    "hold_fixed": "micro_batch",
}
"""The batch fields :func:`shape_free` fixes, and the values it fixes them at."""


@lru_cache(maxsize=256)
def shape_free(plan: Plan) -> Plan:
    """``plan`` with :data:`FIXED_SHAPE` in its batch section (no validation runs: the
    plan is only ever read by rows that ignore those fields)."""
    return plan.model_copy(update={"batch": plan.batch.model_copy(update=FIXED_SHAPE)})
