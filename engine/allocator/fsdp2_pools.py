"""FSDP2's reserve beyond the live tensors, from which stream allocates which buffer.

FSDP2 (``torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py``) allocates on three
streams, and the caching allocator reuses a freed block only on the stream that
allocated it (``c10/cuda/CUDACachingAllocator.cpp``: one pool per stream):

- *all-gather (copy-in) stream*: ``foreach_all_gather`` runs ``all_gather_copy_in``
  under ``all_gather_copy_in_stream``, which allocates each unit's flat all-gather
  output there; ``FSDPParamGroup.wait_for_unshard`` copies it out into the unsharded
  parameters and, in forward, keeps it in ``comm_ctx.all_gather_state`` until the next
  unit's all-gather — so that pool holds the root unit's output (gathered first) beside
  the first layer unit's: ``ag`` bytes, times ``runtime.side_stream_cache`` for the
  compute stream's cached copies, as before;
- *reduce-scatter stream*: ``foreach_reduce`` allocates ``reduce_output`` under
  ``reduce_scatter_stream`` and makes the sharded gradients views of it ("Since the GPU
  sharded gradient is allocated in the RS stream"); ``zero_grad(set_to_none=True)``
  frees them into that pool, where they stay reserved and unusable by the compute
  stream until the next backward's reduce-scatters reuse them: ``rs`` bytes free at
  every moment before the first reduce-scatter — the loss's backward included;
- *compute stream*: the unsharded parameters (copy-out), the reduce-scatter input
  (``reduce_scatter_comm.allocate`` runs before the stream switch) and the unsharded
  gradients are compute-stream transients: ``runtime.fragmentation`` covers them.

torchtitan's plain loss (``train.py`` at 9dec370: ``loss_fn`` is
``cross_entropy(pred.flatten(0, 1).float(), ...)``, then ``del pred`` before
``loss.backward()``) frees the 16-bit logits and their fp32 upcast before backward:
the nll-loss gradient (the fp32 size) fits in that freed region (1.5 × its size) and
the log-softmax gradient does not, so at the loss's backward one 16-bit-logits block
(``hole``) is free inside the reserve. The loss's own fp32 T × V blocks (``loss``
bytes) are then accounted block by block, not as a share of the transient.
"""

from __future__ import annotations

from typing import NamedTuple


class Fsdp2Pools(NamedTuple):
    """The bytes :func:`fsdp2_extra` reads: ``ag`` the all-gather stream's working set,
    ``rs`` the sharded gradients its reduce-scatter stream keeps (0 where they stay
    allocated: ``zero_grad`` filling zeros, gradient accumulation, CPU offload),
    ``hole`` and ``loss`` the freed 16-bit logits and the loss's live T × V blocks at
    the loss's backward (0 without torchtitan's plain loss)."""

    ag: int = 0
    rs: int = 0
    hole: int = 0
    loss: int = 0


NO_POOLS = Fsdp2Pools()
"""Another family's stage: no FSDP2 pools."""


def fsdp2_extra(
    frag: tuple[float, float],
    side: tuple[float, float],
    pools: Fsdp2Pools,
    transient: tuple[int, int],
    at_loss: tuple[bool, bool] | None,
) -> tuple[int, int]:
    """(low, high) reserved − allocated of an FSDP2 stage over an allocated range whose
    transient part is ``transient``; ``at_loss``: for the backward phase, whether each
    end is the loss's backward (the moment before any reduce-scatter), None for the other
    phases. Elsewhere than at the loss the reduce-scatter pool is free (steady, forward,
    the layers' backward before their reduce-scatters refill it) or allocated (the
    optimizer step, the end of backward), so 0 to ``rs``.

    At the loss's backward: fragmentation × (transient − the loss's blocks) + the freed
    16-bit logits + ``side`` × ``ag`` + ``rs``; elsewhere the loss's terms are 0."""
    ends: list[int] = []
    for i in (0, 1):
        loss_end = at_loss is not None and at_loss[i]
        t = max(0, transient[i] - (pools.loss if loss_end else 0))
        rs = pools.rs if loss_end or i == 1 else 0
        hole = pools.hole if loss_end else 0
        ends.append(int(t * frag[i]) + int(pools.ag * side[i]) + rs + hole)
    return ends[0], ends[1]


def fsdp2_formula(
    frag: tuple[float, float],
    side: tuple[float, float],
    pools: Fsdp2Pools,
    transient: tuple[int, int],
    at_loss: tuple[bool, bool] | None,
) -> str:
    """:func:`fsdp2_extra`'s terms in words, with the numbers substituted."""
    loss = at_loss is not None and at_loss[1]
    t = [max(0, x - (pools.loss if loss else 0)) for x in transient]
    rs = f"{pools.rs:,} B" if loss else f"0–{pools.rs:,} B"
    text = (
        f"fragmentation {frag[0]:.2f}–{frag[1]:.2f} × transient {t[0]:,}–{t[1]:,} B"
        + (f" (the loss's {pools.loss:,} B of T × V blocks counted apart)" if loss else "")
        + f" + FSDP2 all-gather stream {side[0]:.2f}–{side[1]:.2f} × {pools.ag:,} B "
        f"(root and one layer unit's all-gather outputs) + reduce-scatter stream's freed "
        f"sharded gradients {rs}"
    )
    if loss and pools.hole:
        text += f" + the 16-bit logits' freed block {pools.hole:,} B (torchtitan del pred)"
    return text
