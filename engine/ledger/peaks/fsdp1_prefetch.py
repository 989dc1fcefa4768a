"""FSDP1's last layer unit, prefetched by the root before the loss's backward
(``hbm.gathered.last_layer_prefetch``).

Why a row of its own: with ``BackwardPrefetch.BACKWARD_PRE`` (FSDP1's default) every
handle's pre-backward hook prefetches the handle that ran just before it in forward.
torch 2.13 ``torch/distributed/fsdp/_runtime_utils.py`` ``_pre_backward_hook`` calls
``_prefetch_handle(state, handle, _PrefetchMode.BACKWARD)``, whose target is
``_exec_order_utils.ExecOrderData.get_handle_to_backward_prefetch``: the handle at
index − 1 in the post-forward order. The root unit (embedding, final norm, lm_head)
finishes its forward last, so the handle before it is the last decoder layer's, and
the root's pre-backward hook is registered on the root's forward outputs
(``_register_pre_backward_hooks``): it fires when autograd reaches the loss tensor
Hugging Face's causal-LM forward returns, *before* the loss's own backward. That
layer's unsharded flat parameter (all-gathered on the unshard stream,
``_unshard``) is therefore live through the loss's backward (``backward.start``); its
own pre-backward then finds it unsharded and the ``hbm.gathered.layers`` row takes
over.

It lives in the unshard stream's pool: a block the forward's all-gathers left cached
there (:class:`~engine.allocator.reserve.ReserveModel` ``fsdp1``), so it is no extra
side-stream working set (``runtime.side_bytes`` leaves it out) and the loss floor counts
it once, as allocated, not again as the pool's (:func:`~engine.allocator.reserve.
loss_floor`, :attr:`~engine.allocator.reserve.SideBytes.ahead`).
"""

from __future__ import annotations

from engine.ledger.row import AT_LOSS, BACKWARD, Row, make_row
from engine.plan import Plan
from engine.units import fmt_count

PREFETCH_ID = "hbm.gathered.last_layer_prefetch"


def fsdp1_in_flight(plan: Plan, unit: int, n_layers: int) -> tuple[int, str, list[Row]]:
    """FSDP1's layer units in flight during the layers' backward (2 with
    ``limit_all_gathers`` or ``BACKWARD_PRE``: the current and the next, else 1), the
    text saying why, and the root's prefetch at the loss (:func:`root_prefetch_rows`)."""
    k = plan.parallelism.knobs
    two = k.fsdp1_limit_all_gathers or k.fsdp1_backward_prefetch == "backward_pre"
    why = "current + next (limit_all_gathers / BACKWARD_PRE)" if two else "current"
    return (2 if two else 1), why, root_prefetch_rows(plan, unit, n_layers)


def root_prefetch_rows(plan: Plan, unit: int, n_layers: int) -> list[Row]:
    """The last layer's unit live at the loss's backward, for a sharded FSDP1 plan with
    ``BACKWARD_PRE`` whose layers are units of their own (``unit`` bytes; none when
    there is no layer unit, or every unit stays gathered, which the caller decides)."""
    k = plan.parallelism.knobs
    if k.fsdp1_backward_prefetch != "backward_pre" or unit <= 0 or n_layers <= 0:
        return []
    return [
        make_row(
            id=PREFETCH_ID,
            label="Last layer unit prefetched by the root (BACKWARD_PRE)",
            state="gathered",
            location="hbm",
            kind="peak",
            group="gathered",
            low=unit,
            high=unit,
            formula=f"the root's pre-backward hook gathers the last layer's unit before "
            f"the loss's backward: 1 × {fmt_count(unit)} B",
            source="fsdp1",
            phases=BACKWARD,
            backward=AT_LOSS,
            role="prefetched_unit",
        )
    ]
