"""torchtitan's chunked loss leaves FSDP2 nothing to prefetch in the decoder's backward.

``ChunkedLossWrapper.__call__`` (torchtitan 0.3.0 ``components/loss.py``) runs lm_head,
the loss and ``chunk_loss.backward()`` once per chunk *inside* the forward. Each of those
backward calls ends in FSDP2's root final callback (torch 2.13
``_fully_shard/_fsdp_state.py`` ``_root_post_backward_final_callback``): nothing sets
``is_last_backward`` False, so every parameter group's ``finalize_backward`` clears its
``_post_forward_indices`` and the shared ``post_forward_order`` is cleared. When the
decoder's backward runs (``_DecoderOutputGradientBackProp``), each group's
``_backward_prefetch`` finds no forward order and returns (``_fsdp_param_group.py``):
no unit is prefetched. Each layer's ``pre_backward`` all-gathers its own unit instead,
after the previous layer's post-backward reduce-scatter, and ``wait_for_unshard``'s
copy-out frees the flat all-gather output before the layer computes anything
(``_all_gather_result = None`` outside forward). So, under the chunked loss:

- while a layer's backward computes, only its own unit is gathered: no prefetched
  buffer is live beside its working set (``hbm.gathered.all_gather_buffer`` is live at
  no backward moment, kept as a row for the side-stream pool);
- at its pre-backward the flat all-gather output and the unsharded parameters are live
  together, beside the incoming residual gradient, the previous layer's reduce-scatter
  input and the saved activations, before any recompute: the working-set row takes
  that moment as one more candidate (:func:`own_gather_at`);
- the embedding unit is all-gathered only after the first layer's post-backward has
  freed that layer's unit and working set (``titan_units``: its row at ``backward.end``
  counts what its unit and all-gather output add beyond the first layer's).

Traced (``tests/fidelity_grid.py --titan --families qwen3_moe --loss chunked``): every
``_allgather_base_`` of the decoder's backward falls inside the layer's own backward;
the L2 peak, 9,128,751,616 B, is layer 0's pre-backward copy-out (unit 1,246,241,792 +
all-gather output 1,246,241,280 + layer 1's reduce-scatter input 2,492,482,560 + layer 0's
saved set + the 8 MiB incoming gradient), where the eager loss's peak is layer 0's
experts' backward with the prefetched embedding unit beside it.
"""

from __future__ import annotations

from collections.abc import Callable

from engine.ledger.peaks.titan_units import no_backward_prefetch, shard_groups
from engine.ledger.placement import LocalTensor, place_stage
from engine.ledger.row import BACKWARD, NO_MOMENTS, Row
from engine.ledger.shape_free import free_memo, shape_free
from engine.plan import Plan
from engine.units import ceil_div, fmt_count, round_up


def unit_flat_elements(plan: Plan) -> int:
    """The largest decoder-layer unit's flat all-gather output in elements, each tensor's
    dim 0 padded to the group that shards it (``foreach_all_gather``, as
    ``gathered._padded_flat`` counts it), over every stage. It reads no micro-batch
    shape: worked out on the shape-free plan, kept in its memo."""
    return free_memo(plan).get("unit_flat_elements", _unit_flat, shape_free(plan))


def _unit_flat(plan: Plan) -> int:
    dense, expert = shard_groups(plan)
    arch, par = plan.model.architecture, plan.parallelism
    best = 0
    for stage in range(par.pp):
        units: dict[int, list[LocalTensor]] = {}
        for t in place_stage(arch, par, stage):
            if t.tensor.layer is not None:
                units.setdefault(t.tensor.layer, []).append(t)
        for ts in units.values():
            least = min([t.count for t in ts])
            numel = 0
            for t in ts:
                if t.shape and t.shape[0]:
                    n = expert if t.expert else dense
                    numel += (
                        ceil_div(t.shape[0], n) * n * (t.numel // t.shape[0]) * (t.count // least)
                    )
            best = max(best, numel)
    return best


def own_gather_bytes(plan: Plan, gb: int) -> int:
    """A layer's own flat all-gather output at ``gb`` bytes an element, where the plan
    has no backward prefetch (0 elsewhere)."""
    if not no_backward_prefetch(plan):
        return 0
    return round_up(unit_flat_elements(plan) * gb, plan.runtime.allocation_granularity_bytes)


def own_gather_at(plan: Plan) -> Callable[[int, int], tuple[int, str]] | None:
    """The working-set row's pre-backward candidate (module docstring): given the gather
    dtype's bytes and the incoming residual gradient's, (the bytes live then beyond the
    unit and the saved sets, its words); None where the plan prefetches."""
    if not no_backward_prefetch(plan):
        return None

    def at(gb: int, grad: int) -> tuple[int, str]:
        buf = own_gather_bytes(plan, gb)
        n = buf + grad
        return n, (
            f"at its pre-backward (chunked loss: no FSDP2 prefetch) its own all-gather "
            f"output {fmt_count(buf)} + incoming grad {fmt_count(grad)} = {fmt_count(n)} B"
        )

    return at


def own_buffer(row: Row) -> Row:
    """The all-gather output buffer's row where nothing is prefetched: live at no
    moment (the working-set row counts it at each layer's pre-backward), kept for the
    side-stream pool (``runtime.side_bytes`` reads the gathered rows)."""
    return row._replace(
        label="All-gather output buffer of a layer's own unit (no backward prefetch)",
        phases=BACKWARD,
        moments=NO_MOMENTS,
    )
