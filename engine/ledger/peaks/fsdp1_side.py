"""FSDP1's side bytes: what the stage's rows say of its unshard, pre-unshard and
post-backward pools and of the cache its construction leaves (the FSDP1 branch of
:func:`engine.ledger.peaks.runtime.side_bytes`).

Why a module of its own: the FSDP1 reserve reads the root unit's and the layer units'
gathered rows, NO_SHARD's weight rows, the wrap's replay and the sharded gradients; kept
beside :mod:`~engine.ledger.peaks.fsdp1_wrap` and
:mod:`~engine.ledger.peaks.fsdp1_grad_pool`, the other FSDP1 reserve inputs.
"""

from __future__ import annotations

from engine.allocator.reserve import SideBytes, fsdp1_init_cache, pre_unshard_pool
from engine.ledger.peaks.fsdp1_grad_pool import fsdp1_grad_pool
from engine.ledger.peaks.fsdp1_wrap import no_shard_units, wrap_init, wrap_units
from engine.ledger.row import Row
from engine.plan import Plan


def fsdp1_side(rows: tuple[Row, ...], plan: Plan, total: int, ahead: int) -> SideBytes:
    """The FSDP1 stage's :class:`~engine.allocator.reserve.SideBytes` from its ``rows``:
    ``total`` gathered and bucket bytes, ``ahead`` the root's prefetched last layer unit
    (in a cached unshard block)."""
    root = sum(r.high for r in rows if r.role == "root_unit")
    layers = sum(r.high for r in rows if r.role == "layer_units")
    if not layers and plan.parallelism.strategy == "fsdp1_no_shard":
        held = {r.id: r.high for r in rows if r.location == "hbm"}
        frozen, nf4 = held.get("hbm.weights.frozen", 0), held.get("hbm.weights.nf4", 0)
        root, unit = no_shard_units(plan, frozen, nf4)
        init = wrap_init(plan, root, unit) if unit > 0 else None
        # no all-gather, so no side-stream unit; the root bounds the cached blocks
        if not init:
            return SideBytes(total)
        made = SideBytes(total, init, 0, root)
        made.wrap = wrap_units(plan, root, unit)
        return made
    if not layers:
        return SideBytes(total)
    k = plan.parallelism.knobs  # the units the layers row counts (gathered._fsdp_rows)
    live = 2 if k.fsdp1_limit_all_gathers or k.fsdp1_backward_prefetch == "backward_pre" else 1
    unit = layers // live
    init = wrap_init(plan, root, unit) or fsdp1_init_cache(root, unit)
    # CPU offload: the pre-unshard stream's pool (SideBytes.pre); adapters are units of
    # their own under FSDP1 (use_orig_params=False needs uniform requires_grad per unit)
    nested = plan.method.kind in ("lora", "qlora")
    off = plan.offload.params == "cpu"
    pre = pre_unshard_pool(root, unit, plan.parallelism.dp, nested) if off else (0, 0)
    made = SideBytes(total, init, unit, root, (0, 0), pre)
    made.ahead = ahead
    made.wrap = wrap_units(plan, root, unit)  # the loss stage replays its forward with them
    made.grads, made.grads_at = fsdp1_grad_pool(rows, plan)
    return made
