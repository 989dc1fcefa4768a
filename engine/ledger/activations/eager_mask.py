"""Eager attention's additive masks (``hbm.activations.forward.mask``).

transformers 5.24 ``masking_utils.eager_mask`` always materialises a (b, 1, s, s) mask in
the compute dtype (no causal skip for eager). A family alternating sliding-window and
full layers builds one per layer type (``causal_mask_mapping``: ``full_attention`` and
``sliding_attention`` in Gemma-2 / Gemma-3 / Cohere-2's ``Model.forward``), so two are live
in forward. The masks are model-forward locals, freed when forward returns — unless the
layers are checkpointed: each checkpointed layer then keeps its mask as an input to
recompute from (one tensor per layer type, shared by the layers), through the layers'
backward (issue 35 item 8).
"""

from __future__ import annotations

from engine.ledger.activations.geometry import Geometry
from engine.ledger.activations.varying import Fixed, Span, new_fixed
from engine.ledger.row import FORWARD_BACKWARD, THROUGH_LAYERS, Moment, Row, moments_in, span_row
from engine.units import fmt_count, round_up

TWO_MASKS = frozenset({"gemma2", "gemma3", "cohere2"})
"""Families whose model builds a full and a sliding-window mask."""


_KEPT = moments_in(FORWARD_BACKWARD, THROUGH_LAYERS)
"""A checkpointed stage's masks: forward, and its layers' backward."""
_FORWARD = moments_in(FORWARD_BACKWARD, frozenset())
"""An uncheckpointed stage's masks: forward only."""


def mask_part(g: Geometry, family: str, ckpt: bool) -> Fixed:
    """The eager masks of a micro-batch at ``g`` (``ckpt``: the stage checkpoints)."""
    n = 2 if family in TWO_MASKS else 1
    one = round_up(g.micro_batch * g.seq * g.seq * g.compute_bytes, g.granularity)
    total = n * one
    kinds = "full and sliding-window masks" if n == 2 else "causal mask"
    kept = ", kept by the checkpointed layers through backward" if ckpt else ""

    def words(span: Span, moments: frozenset[Moment]) -> Row:
        return span_row(
            id="hbm.activations.forward.mask",
            label=f"Eager attention {kinds} (b × 1 × s × s){kept}",
            state="activations",
            span=span,
            moments=moments,
            formula=lambda: (
                f"{n} × {g.micro_batch}·{g.seq}·{g.seq}·{g.compute_bytes} = {fmt_count(total)} B"
            ),
            source="hf-transformers-llama",
            phases=FORWARD_BACKWARD,
        )

    return new_fixed(((total, total), words, True, _KEPT if ckpt else _FORWARD))
