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

Before torch 2.5 the reduce-scatter *input* was made on the reduce-scatter stream too
(``torch/distributed/_composable/fsdp/_fsdp_collectives.py`` ``foreach_reduce_scatter``
as of March 2024: ``torch.empty`` of the flat input in the reduce dtype under
``torch.cuda.stream(reduce_scatter_stream)``; pytorch#129721, June 2024, moved the
copy-in to the default stream "to avoid fragmenting that memory across stream memory
pools"). Each layer unit's input is freed on that stream once its collective is issued,
so the next layer's reuses its block (same size, best fit); the root unit's, reduced
last, is larger where it holds the embedding and the output (a segment of its own, as
every request of 10 MiB or more gets). That pool (``rs_layer`` + ``rs_root``) is free
at the loss's backward, before any reduce-scatter.

Whether a second layer block is made (``rs_pending``) depends on how the collective's
input is kept alive, which the code of the run decides:

- ProcessGroupNCCL (``collective()``) calls ``recordStream(input, ncclStream)`` unless
  ``TORCH_NCCL_AVOID_RECORD_STREAMS`` is set; the caching allocator then returns the
  freed block to its pool only once an event recorded on the NCCL stream completed
  (``insert_events`` / ``process_events``, queried at the next request, never waited);
- with the variable set it stashes the input in the work
  (``stashed_for_allocator_safety_``) and clears the stash in
  ``WorkNCCL::synchronizeStreams`` — the ``wait()`` that c10d calls at once for a
  synchronous collective, right after the current (reduce-scatter) stream has been made
  to wait on the NCCL end event — so the block goes back to the reduce-scatter stream's
  pool in that stream's order and the next layer's request reuses it: no second block
  (:data:`RS_PENDING_STASHED`);
- torchtitan 83c879f (PR #165, 2024-03-28): ``torchtrain/utils.py`` ``init_distributed``
  sets ``TORCH_NCCL_ASYNC_ERROR_HANDLING`` and the flight recorder's variables, not
  ``TORCH_NCCL_AVOID_RECORD_STREAMS`` (first set in e62573d4c, 2024-04-10, "avoid record
  streams"; 9dec370 has it, 681c66f28 removed it in 2025), so the run recorded streams;
- FSDP2 of that date (``_fsdp_param_group.py`` ``post_backward``) calls
  ``foreach_reduce_scatter`` with no wait on the previous unit's reduce-scatter: its
  only ordering is on streams (``reduce_scatter_stream.wait_stream(current)``, the
  compute stream waiting on the copy-in event), and ``_reduce_scatter_view_out_event``
  is waited only in ``finalize_backward``; the later ``comm_ctx.reduce_scatter_state``
  (pytorch#129721's default-stream input) is a stream wait too. Nothing on the host
  waits for the GPU between the step's blocking ``input_ids.cuda()`` and its
  ``loss.item()``.

So under ``recordStream`` a layer's block is pending while its collective has not run on
the GPU, and how many are pending when the next layer's input is requested is how far
the host runs ahead of the GPU in backward. The step bounds that lead from below:

- layer L's collective starts only after L's backward kernels ran
  (``reduce_scatter_stream.wait_stream(current)``, and ProcessGroupNCCL's ``syncStream``
  makes the NCCL stream wait on the reduce-scatter stream), so its block is back no
  earlier than the end of L's backward on the GPU plus its reduce-scatter;
- the host requests layer L−1's input in L−1's ``post_backward``, right after launching
  L−1's backward kernels, and nothing on the way waits for the GPU: FSDP2's waits are
  stream and event waits (``wait_for_unshard``, ``_wait_all_gather_streams_on_event``,
  ``foreach_reduce_scatter``, ``finalize_backward``), the allocator's
  ``process_events`` polls with ``cudaEventQuery``, c10d's ``wait()`` of a synchronous
  collective is a stream wait (no ``TORCH_NCCL_BLOCKING_WAIT``), and torchtitan
  83c879f's ``train.py`` stops the host only at the batch's ``.cuda()`` (a blocking
  copy: ``cudaStreamSynchronize``) and at ``loss.item()`` after the optimizer step;
- so, with ``h`` the host's time to launch one layer's backward (hooks included) and
  ``g`` the GPU's time to run it: the second layer's input is requested at most ``2h``
  after the host launched the first layer's backward, and the first layer's collective
  ends at least ``g`` after that launch. A backward with ``g > 2h`` — GPU-bound, as every
  step MemPlan sizes is (PR #165's full AC: 16,384 tokens at ~6,200 tokens/s, 2.6 s a
  step, ~60 ms of GPU time per layer's recompute and backward against milliseconds of
  Python and launches) — finds the first layer's block pending, every step; the
  pool's reserve is its high-water, so one such request suffices. A launch queue
  already full from the forward does not change that: the host then leads by the
  queue (about a thousand launches per stream), several times one layer's backward
  (of the order of a hundred launches).

So the low end takes one pending block (``RS_PENDING_RECORD_STREAM[0]``). Above it the
code gives no bound: the lead grows by ``g − h`` a layer until the driver's launch queue
holds the host, and a host ``k`` layers ahead leaves ``k`` blocks pending (from the
second step on, one more can be cut from the root's block, free until the root's
reduce-scatter, last). The queue's depth and a layer's launch count are not in the plan.
The high end keeps one (a lead of under two layers) — an assumption the published pair
checks, not a bound: PR #165's full AC measured 36.5 % of allocated, inside 33.5–36.6 %
with one block, while two would put the band's low end at 36.8 %
(``tests/engine/allocator/test_calibration.py``).

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

RS_PENDING_RECORD_STREAM = (1, 1)
"""(low, high) layer blocks pending when ProcessGroupNCCL records the NCCL stream on the
input (TORCH_NCCL_AVOID_RECORD_STREAMS unset, as torchtitan 83c879f ran): at least one
for a GPU-bound backward, whose host is a layer ahead when the next input is requested;
one at the high end too, an assumption — the code bounds the lead only by the driver's
launch queue (module docstring)."""

RS_PENDING_STASHED = (0, 0)
"""TORCH_NCCL_AVOID_RECORD_STREAMS=1: the stash is cleared by the synchronous
collective's own ``wait()``, in the reduce-scatter stream's order: no block pending."""


class Fsdp2Pools(NamedTuple):
    """The bytes :func:`fsdp2_extra` reads: ``ag`` the all-gather stream's working set,
    ``rs`` the sharded gradients its reduce-scatter stream keeps (0 where they stay
    allocated: ``zero_grad`` filling zeros, gradient accumulation, CPU offload),
    ``hole`` and ``loss`` the freed 16-bit logits and the loss's live T × V blocks at
    the loss's backward (0 without torchtitan's plain loss); ``rs_layer`` and ``rs_root``
    the reduce-scatter inputs kept in the reduce-scatter stream's pool before torch 2.5
    (a layer unit's, and the root unit's block beside it where the root's is larger; 0
    from torch 2.5 on, where the input is a compute-stream transient)."""

    ag: int = 0
    rs: int = 0
    hole: int = 0
    loss: int = 0
    rs_layer: int = 0
    rs_root: int = 0
    rs_pending: tuple[int, int] = RS_PENDING_RECORD_STREAM
    """(low, high) layer blocks more, freed but awaiting their collective
    (:data:`RS_PENDING_RECORD_STREAM` or :data:`RS_PENDING_STASHED`)."""


NO_POOLS = Fsdp2Pools()
"""Another family's stage: no FSDP2 pools."""

RS_INPUT_ON_DEFAULT_STREAM = (2, 5)
"""The torch release whose FSDP2 makes the reduce-scatter input on the default stream
(pytorch#129721, June 2024; torch 2.4 was cut before it)."""


def reduce_scatter_inputs(torch: tuple[int, int], layer: int, root: int) -> tuple[int, int]:
    """(``rs_layer``, ``rs_root``) under torch ``torch`` (major, minor), from the largest
    layer unit's reduce-scatter input and the root unit's (0: its parameters have no
    gradients): (0, 0) from :data:`RS_INPUT_ON_DEFAULT_STREAM` on; before it the layer's
    block, and the root's beside it only where larger (else it reuses the layer's)."""
    if torch >= RS_INPUT_ON_DEFAULT_STREAM or not layer:
        return 0, 0
    return layer, root if root > layer else 0


def fsdp2_extra(
    frag: tuple[float, float],
    side: tuple[float, float],
    pools: Fsdp2Pools,
    transient: tuple[int, int],
    at_loss: tuple[bool, bool] | None,
    before_rs: tuple[bool, bool] | None = None,
) -> tuple[int, int]:
    """(low, high) reserved − allocated of an FSDP2 stage over an allocated range whose
    transient part is ``transient``; ``at_loss``: for the backward phase, whether each
    end is the loss's backward (the moment before any reduce-scatter), None for the other
    phases. Elsewhere than at the loss the reduce-scatter pool is free (steady, forward,
    the layers' backward before their reduce-scatters refill it) or allocated (the
    optimizer step, the end of backward), so 0 to ``rs``.

    At the loss's backward: fragmentation × (transient − the loss's blocks) + the freed
    16-bit logits + ``side`` × ``ag`` + ``rs``; elsewhere the loss's terms are 0.

    Before torch 2.5 (``rs_layer``): the reduce-scatter inputs' pool, ``rs_layer`` +
    ``rs_root``, is free at the loss's backward, with ``rs_pending`` (low, high) layer
    blocks more (still awaiting their collective when the next was requested: see the
    module docstring); elsewhere a layer's input may be live (the
    ``hbm.buckets.reduce_scatter`` row counts it), so the low end keeps ``rs_root`` and
    the pending blocks.

    ``before_rs``: for the backward phase, whether each end is a moment before any
    reduce-scatter — the loss's backward or the last layer's (``backward.layers``): the
    reduce-scatter stream's pools are as free there as at the loss, without the loss's
    terms (None: the loss's moment alone)."""
    ends: list[int] = []
    free = at_loss if before_rs is None else before_rs
    for i in (0, 1):
        loss_end = at_loss is not None and at_loss[i]
        free_end = loss_end or (free is not None and free[i])
        t = max(0, transient[i] - (pools.loss if loss_end else 0))
        rs = pools.rs if free_end or i == 1 else 0
        hole = pools.hole if loss_end else 0
        ends.append(
            int(t * frag[i]) + int(pools.ag * side[i]) + rs + hole + _rs_in(pools, i, free_end)
        )
    return ends[0], ends[1]


def _rs_in(pools: Fsdp2Pools, i: int, loss_end: bool) -> int:
    """The free part of the reduce-scatter inputs' pool at the low (``i`` 0) or high end
    (:func:`fsdp2_extra`); 0 from torch 2.5 on."""
    layers = pools.rs_pending[i] + (1 if i == 1 or loss_end else 0)
    return layers * pools.rs_layer + pools.rs_root


def fsdp2_formula(
    frag: tuple[float, float],
    side: tuple[float, float],
    pools: Fsdp2Pools,
    transient: tuple[int, int],
    at_loss: tuple[bool, bool] | None,
    before_rs: tuple[bool, bool] | None = None,
) -> str:
    """:func:`fsdp2_extra`'s terms in words, with the numbers substituted."""
    loss = at_loss is not None and at_loss[1]
    free = loss or (before_rs is not None and before_rs[1])
    t = [max(0, x - (pools.loss if loss else 0)) for x in transient]
    rs = f"{pools.rs:,} B" if free else f"0–{pools.rs:,} B"
    text = (
        f"fragmentation {frag[0]:.2f}–{frag[1]:.2f} × transient {t[0]:,}–{t[1]:,} B"
        + (f" (the loss's {pools.loss:,} B of T × V blocks counted apart)" if loss else "")
        + f" + FSDP2 all-gather stream {side[0]:.2f}–{side[1]:.2f} × {pools.ag:,} B "
        f"(root and one layer unit's all-gather outputs) + reduce-scatter stream's freed "
        f"sharded gradients {rs}"
    )
    if loss and pools.hole:
        text += f" + the 16-bit logits' freed block {pools.hole:,} B (torchtitan del pred)"
    if pools.rs_layer:
        low = _rs_in(pools, 0, free)
        text += (
            f" + reduce-scatter inputs on their stream (torch < 2.5) {low:,}–"
            f"{_rs_in(pools, 1, free):,} B (a layer's {pools.rs_layer:,} B"
            + (f", the root's {pools.rs_root:,} B beside it" if pools.rs_root else "")
            + _pending_words(pools.rs_pending)
        )
    return text


def _pending_words(pending: tuple[int, int]) -> str:
    """The pending layer blocks in :func:`fsdp2_formula`'s words."""
    if not pending[1]:
        return ")"
    n = "one layer's" if pending == (1, 1) else f"{pending[0]}–{pending[1]} layers'"
    return f", {n} more awaiting its collective: the host leads a GPU-bound backward)"
