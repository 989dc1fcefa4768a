"""How a measured reference case's tracker categories map onto the ledger's row groups.

Its own module, not :mod:`engine.validation.records`: reconciling a record with the
estimate (:mod:`engine.validation.reconcile`, which the report's assumptions section
asks for every plan) needs this table but not the record schema, whose pydantic models
are built only where records are read.
"""

from __future__ import annotations

REFERENCE_CATEGORY_GROUP: dict[str, str] = {
    "params": "weights",
    "params_unsharded": "gathered",
    "all_gather": "gathered",
    "grads": "gradients",
    "grads_unsharded": "buckets",
    "reduce_scatter": "buckets",
    "grad_buckets": "buckets",
    "optimizer": "optimizer",
    "optimizer_state": "optimizer",
    "optimizer_temp": "temporaries",
    "activations": "activations",
    "inputs": "inputs",
    "buffers": "buffers",
    "temp": "logits",
}
"""Reference tracker category → ledger row group (why each: see ``reconcile.py``)."""
