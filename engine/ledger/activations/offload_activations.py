"""Saved activations moved to host memory: what stays on the GPU and what the host holds.

Two ways a stage's saved layers leave HBM:

- ``method.recompute.policy == "offload"``: ``torch.autograd.graph.save_on_cpu`` around
  the layers (source ``torch-activation-offload``): every layer's saved set goes to
  pinned host memory; the GPU holds the layer being copied out and the next one.
- ``method.recompute.offload_activations`` (torchtune ``enable_activation_offloading``,
  torchtune/training/_activation_offloading.py ``OffloadActivations``, source
  ``torchtune-activation-offloading``): a ``saved_tensors_hooks`` pack moves each saved
  tensor of at least ``min_offload_size`` (1 KiB) to pinned host memory on a side stream,
  keeping at most ``max_fwd_stash_size`` (5) tensors on the GPU until their copies are
  done; backward's unpack brings them back on a prefetch stream, one layer ahead. The
  recipes turn it on with activation checkpointing, so the tensors saved are the
  checkpointed layers' inputs (one per layer): the GPU holds one to five of them. On
  layers not checkpointed (a layer's saved set is many tensors) the GPU holds the layer
  in flight and the next: one to two layers' sets. The output layer runs outside the
  hooks (torchtune wraps it in a ``NoOpManager``): the head's saved input stays in HBM
  (its row is unchanged).

The host holds the stage's whole saved set: the plain layers' and the checkpointed
layers' inputs, times the micro-batches in flight.
"""

from __future__ import annotations

from engine.ledger.activations.stage_layers import StageLayers
from engine.plan import Plan
from engine.units import fmt_count

FWD_STASH = 5
"""OffloadActivations' default ``max_fwd_stash_size``: saved tensors kept on the GPU while
their copies to the host run."""


def offloads(plan: Plan) -> bool:
    """Whether the stage's saved layers live in host memory."""
    rec = plan.method.recompute
    return rec.policy == "offload" or rec.offload_activations


def source_of(plan: Plan) -> str:
    """The host row's source key."""
    if plan.method.recompute.offload_activations and plan.method.recompute.policy != "offload":
        return "torchtune-activation-offloading"
    return "torch-activation-offload"


def gpu_span(sl: StageLayers) -> tuple[int, int, str]:
    """(low, high, why) of the saved layers still in HBM (module doc)."""
    if sl.n_plain:
        unit = sl.largest
        return (
            unit,
            2 * unit,
            f"the layer being copied out and the next one, 1–2 × {fmt_count(unit)} B",
        )
    unit = sl.ckpt_bytes
    stash = max(1, min(sl.n_ckpt, FWD_STASH))
    return (
        unit,
        stash * unit,
        f"1–{stash} checkpointed layers' inputs in the forward stash / prefetch, "
        f"× {fmt_count(unit)} B",
    )
