"""Saved activations moved to host memory: what stays on the GPU and what the host holds.

Two ways a stage's saved layers leave HBM:

- ``method.recompute.policy == "offload"``: ``torch.autograd.graph.save_on_cpu`` around
  the layers (source ``torch-activation-offload``): every layer's saved set goes to
  pinned host memory; the GPU holds the layer being copied out and the next one.
- ``method.recompute.offload_activations`` (torchtune ``enable_activation_offloading``,
  torchtune/training/_activation_offloading.py ``OffloadActivations`` at 1814feb, source
  ``torchtune-activation-offloading``): a ``saved_tensors_hooks`` pack gives every saved
  tensor the next id and copies each of at least ``min_offload_size`` (1 KiB) that is
  not a parameter to pinned host memory on a side stream, keeping the GPU tensor in
  ``fwd_stash``; each such pack first drops the stashed ids at or below its own id minus
  ``max_fwd_stash_size`` (5). The output layer runs under a ``NoOpManager``
  (``get_act_offloading_ctx_manager``): the head's saved input stays in HBM (its row is
  unchanged).

Where the layers are checkpointed (the recipes turn offloading on with activation
checkpointing), a layer packs two ids — torch.utils.checkpoint's ``_NoopSaveInputs``
saves its 0-element ``dummy``, then the layer's input (torchtune's decoder passes mask and
positions as keyword arguments, which it does not save) — and the GPU holds, per moment
(:func:`at_loss` and :func:`unpacked_parts`):

- at the loss (``forward``, ``backward.start``): the layer inputs whose ids are still in
  the stash's window when forward ends. After the last layer, torchtune's final
  ``RMSNorm`` (torchtune/modules/rms_norm.py) packs four large tensors — ``pow(2)``'s fp32
  input, ``rsqrt``'s output, and both factors of their product — and, when its scale is
  trained, ``x_normed`` for ``x_normed * self.scale``: five packs push the last layer's
  input out (full fine-tuning: none left), four leave it (LoRA's frozen norm: one);
- in the layers' backward: the hook after the final norm's node empties ``fwd_stash``, so
  each layer's input is brought back when that layer's backward unpacks it (into
  ``bwd_tensor_stash``), and the previous layer's is freed by the hook after the node
  that unpacked this one: one input at the last layer's backward (the node before it
  brought nothing back), one or two at a middle and the first layer's.

On layers not checkpointed (a layer's saved set is many tensors) the GPU holds the layer
in flight and the next: one to two layers' sets, from forward to the last layer's
backward.

The host holds the stage's whole saved set: the plain layers' and the checkpointed
layers' inputs, times the micro-batches in flight.
"""

from __future__ import annotations

from engine.ledger.activations.geometry import trainability
from engine.ledger.activations.schedule import InFlight
from engine.ledger.activations.stage_layers import StageLayers
from engine.ledger.activations.varying import Span, Varying, new_varying
from engine.ledger.row import BACKWARD, IN_LAYERS, Moment, Row, make_row, moments_in, with_middle
from engine.plan import Plan
from engine.units import fmt_count

FWD_STASH = 5
"""OffloadActivations' default ``max_fwd_stash_size``: the window of saved-tensor ids whose
GPU tensors stay stashed while their copies to the host run."""
IDS_PER_LAYER = 2
"""Ids a checkpointed layer packs: ``_NoopSaveInputs``' 0-element dummy, then its input."""
FINAL_NORM_PACKS = 4
"""Large tensors torchtune's final RMSNorm packs after the last layer's input whatever is
trained (``pow(2)``'s input, ``rsqrt``'s output, the product's two factors); a trained
scale adds ``x_normed``."""
_PREVIOUS: frozenset[Moment] = frozenset({"backward.middle", "backward.end"})


def offloads(plan: Plan) -> bool:
    """Whether the stage's saved layers live in host memory."""
    rec = plan.method.recompute
    return rec.policy == "offload" or rec.offload_activations


def source_of(plan: Plan) -> str:
    """The host row's source key."""
    if plan.method.recompute.offload_activations and plan.method.recompute.policy != "offload":
        return "torchtune-activation-offloading"
    return "torch-activation-offload"


def stash_offload(plan: Plan, n_layers: int, n_ckpt: int) -> bool:
    """Whether the stage follows torchtune's stash (module doc): OffloadActivations over
    checkpointed layers only."""
    return (
        offloads(plan)
        and source_of(plan) == "torchtune-activation-offloading"
        and n_ckpt > 0
        and n_ckpt == n_layers
    )


def at_loss(plan: Plan, n_ckpt: int) -> tuple[int, str]:
    """(layer inputs left in the forward stash when forward ends, why): the ids after the
    last layer's input up to the final norm's last large pack fill the window, each layer
    before it taking :data:`IDS_PER_LAYER` ids."""
    trained = trainability(plan).norms
    packs = FINAL_NORM_PACKS + trained
    slots = max(0, FWD_STASH - packs)
    kept = min(n_ckpt, -(-slots // IDS_PER_LAYER))
    why = (
        f"the final norm's {packs} large packs after the last layer's input"
        f" ({'x_normed kept: its scale is trained' if trained else 'its scale frozen'})"
        f" leave {kept} of them in the {FWD_STASH}-id forward stash"
    )
    return kept, why


def gpu_span(sl: StageLayers, kept: tuple[int, str] | None = None) -> tuple[int, int, str]:
    """(low, high, why) of the saved layers still in HBM through forward (and, without
    ``kept``, to the last layer's backward); ``kept``: :func:`at_loss`'s, torchtune's stash
    at the loss (module doc)."""
    if kept is not None:
        n = kept[0] * sl.ckpt_bytes
        return n, n, f"{kept[1]}: {kept[0]} × {fmt_count(sl.ckpt_bytes)} B"
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


def unpacked_parts(sl: StageLayers, dtype: str) -> list[Varying]:
    """The checkpointed inputs torchtune's unpack brings back in the layers' backward
    (module doc): the running layer's from the last layer's backward on, and the previous
    layer's (0–1) at a middle and the first layer's, until the hook after the node that
    unpacked this one frees it."""
    unit = sl.ckpt_bytes
    words = "the running layer's input, brought back"
    parts = [_part("current", words, 1, unit, IN_LAYERS, dtype)]
    previous = with_middle(_PREVIOUS, sl.n_layers) if sl.n_ckpt > 1 else frozenset()
    if previous:
        words = "the previous layer's input, freed after this layer's first node"
        parts.append(_part("previous", words, 0, unit, previous, dtype))
    return parts


def _part(
    name: str, words: str, least: int, unit: int, moments: frozenset[Moment], dtype: str
) -> Varying:
    """One row of :func:`unpacked_parts`: ``least``–1 inputs of ``unit`` bytes."""
    span = (least * unit, unit)
    count = "1" if least else "0–1"

    def row(fly: InFlight, bytes_: Span, live: frozenset[Moment]) -> Row:
        return make_row(
            id=f"hbm.activations.offload.{name}",
            state="activations",
            label=f"Offloaded layer inputs on the GPU: {words}",
            location="hbm",
            kind="peak",
            group="activations",
            low=bytes_[0],
            high=bytes_[1],
            formula=f"{count} × {fmt_count(unit)} B ({words})",
            source="torchtune-activation-offloading",
            phases=BACKWARD,
            moments=live,
            dtype=dtype,
        )

    return new_varying((lambda fly: span, row, True, moments_in(BACKWARD, moments)))
