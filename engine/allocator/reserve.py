"""The ledger's allocator reserve (reserved − allocated) and the part of it a job cannot
give back, from the caching allocator's rules (:mod:`engine.allocator.rules`).

Why not a share of the whole peak: every request of 10 MiB or more gets a segment of its
own rounded to 2 MiB, so the multi-GB persistent states (flat buffers, sharded
parameters, master weights and moments) waste under 2 MiB each. What the allocator
keeps beyond the live tensors comes from two places:

- *transient churn on the compute stream*: activations, logits and step temporaries are
  freed and made again in other sizes, so split blocks and free gaps stay inside
  segments still in use — ``fragmentation`` × (allocated − the steady, persistent part);
- *per-stream pools*: a block freed on a side stream (FSDP's all-gather and
  reduce-scatter streams, DeepSpeed's) is reused only by that stream, so each stream's
  pool keeps its own high-water; with the compute stream's cached copies of the same
  buffers that is ``side_stream_cache`` × the gathered units and gradient buckets.

Before raising out-of-memory the allocator frees every wholly free cached segment and
retries, so only the fragmentation inside segments still in use can make a job fail:
that is the part the fit test adds (:func:`stuck_extra`). With ``expandable_segments``
free pages are unmapped on that retry too, leaving at most one partial page per stream
pool. The two bands are plan inputs (``runtime.fragmentation`` 0.05–0.09: 0.077 in the
Megatron-LM 1.7B run, 0.059 between torchtitan PR #165's two runs;
``runtime.side_stream_cache`` 1.55–1.74: torchtitan PR #165 keeps 7.6 GiB beyond its
fragmentation where MemPlan's gathered and bucket rows sum to 4.56 GiB), calibrated on
published (allocated, reserved) pairs (``tests/engine/allocator/test_calibration.py``;
the PR #165 pair turned out to be a Llama-2-7B run without expandable segments, not the
8B plan the band was fitted on — see that test); FSDP2 reads its streams' pools from
the code instead (:mod:`engine.allocator.fsdp2_pools`: ``side`` × the all-gather
stream's working set, the sharded gradients in the reduce-scatter stream's pool,
torchtitan's freed logits), checked on torchtitan's December 2024 runs; the
``fraction`` model keeps the old band over the whole peak as an explicit pessimistic
option.
"""

from __future__ import annotations

from typing import NamedTuple

from engine.allocator.fsdp2_pools import NO_POOLS, Fsdp2Pools, fsdp2_extra
from engine.allocator.rules import LARGE_BUFFER

STREAM_POOLS = 3
"""Stream pools that may each keep one partial page under expandable segments: the
compute stream and two side streams (FSDP2's all-gather and reduce-scatter)."""


class SideBytes(int):
    """The gathered units and gradient buckets of a stage (its value, an ``int`` as
    before: the side-stream pools' working sets), carrying ``init``: the (low, high)
    bytes FSDP1's construction left cached on the compute stream (:func:`fsdp1_init_cache`;
    (0, 0) elsewhere) and ``unit``, FSDP1's largest layer unit (0 elsewhere); ``root``
    the root unit's unsharded bytes, ``logits`` the eager loss's requests
    (:func:`with_logits`) and ``pre`` the (low, high) pool of FSDP1's pre-unshard
    stream under CPU offload (:func:`pre_unshard_pool`); ``forward`` the compute
    stream's cache at the loss after a checkpointed forward, replayed
    (:func:`engine.allocator.checkpointed.loss_cache`; 0: not replayed) and ``wrap``
    the FSDP1 units it replays (set by the ledger; None: none known); ``fsdp2`` FSDP2's
    stream pools (:class:`~engine.allocator.fsdp2_pools.Fsdp2Pools`, set by
    :func:`with_fsdp2`; empty elsewhere). An ``int`` so every place that passes or sums
    the side bytes reads it unchanged."""

    init: tuple[int, int]
    unit: int
    root: int
    logits: tuple[int, int]
    pre: tuple[int, int]
    forward: int
    wrap: tuple[tuple[tuple[int, ...], ...], int] | None
    fsdp2: Fsdp2Pools = NO_POOLS
    ahead: int = 0
    """FSDP1's last layer unit the root prefetches before the loss's backward (a block
    of the unshard pool the side bytes already hold; :func:`loss_floor`)."""
    grads: int = 0
    """FSDP1's sharded gradients, made in its post-backward stream's pool and freed there
    by ``zero_grad(set_to_none=True)`` (:func:`grad_pool_free`; 0: none kept)."""
    grads_at: frozenset[str] = frozenset()
    """The moments those gradients are live at (their blocks then in use, not free)."""

    def __new__(
        cls,
        streams: int,
        init: tuple[int, int] = (0, 0),
        unit: int = 0,
        root: int = 0,
        logits: tuple[int, int] = (0, 0),
        pre: tuple[int, int] = (0, 0),
        forward: int = 0,
    ) -> SideBytes:
        made = super().__new__(cls, streams)
        made.init = init
        made.unit = unit
        made.root = root
        made.logits = logits
        made.pre = pre
        made.forward = forward
        made.wrap = None
        return made


def pre_unshard_pool(root: int, unit: int, shards: int, nested_units: bool) -> tuple[int, int]:
    """(low, high) bytes FSDP1's pre-unshard stream keeps under ``CPUOffload(offload_params
    =True)``, from the root unit's and the largest layer unit's unsharded bytes, their
    ``shards`` and whether each layer unit holds nested units (LoRA adapters).

    ``_runtime_utils._unshard`` runs ``handle.pre_unshard()`` on ``pre_unshard_stream``
    *before* the ``limit_all_gathers`` rate limiter; under offload it calls
    ``flat_param_to(device, non_blocking=True)``: a device copy of the CPU shard, made in
    that stream's pool. ``FlatParamHandle._all_gather_flat_param`` then records the
    unshard stream on it (``_no_dispatch_record_stream``), so its block returns to the
    pool only when the all-gather that reads it is done on the GPU. The forward starts
    with the root unit's copy (its shard, the embedding and head, is the largest) and the
    host reaches the first layer's ``pre_unshard`` long before that copy and its
    all-gather finish, so two blocks are live at once: the root's shard and a layer's.
    Later copies find one of them free (each layer shard fits the root's block). With
    nested units (peft's ``fsdp_auto_wrap_policy`` and fsdp_qlora's lambda policy wrap
    every adapter Linear) the third unshard inside the first layer already waits on the
    rate limiter (``_free_event_queue.dequeue_if_needed``, two free events) for the first
    adapter's reshard, which follows both all-gathers: low = high. Without them nothing
    makes the host wait before the third layer's unshard (it waits on the first layer's
    free event), so up to three layer shards can be pending beside the root's."""
    root_shard, unit_shard = -(-root // shards), -(-unit // shards)
    low = root_shard + unit_shard if root_shard else unit_shard
    return low, low if nested_units else low + 2 * unit_shard


def with_logits(side: int, block: int, request: int) -> int:
    """``side`` carrying the eager loss's ``logits``: the 16-bit logits' block freed at the
    fp32 upcast (0 without one) and the smallest fp32 T × V request of the loss (0 where
    no such loss runs), which :func:`loss_floor` reads; ``side`` unchanged when it is no
    FSDP1 :class:`SideBytes` or the loss makes no fp32 request."""
    if not isinstance(side, SideBytes) or side.init == (0, 0) or request <= 0:
        return side
    made = SideBytes(
        int(side), side.init, side.unit, side.root, (block, request), side.pre, side.forward
    )
    _carry(made, side)
    return made


def with_fsdp2(side: int, pools: Fsdp2Pools) -> SideBytes:
    """``side`` as a :class:`SideBytes` carrying FSDP2's stream ``pools``."""
    if isinstance(side, SideBytes):
        made = SideBytes(
            int(side), side.init, side.unit, side.root, side.logits, side.pre, side.forward
        )
        _carry(made, side)
    else:
        made = SideBytes(side)
    made.fsdp2 = pools
    return made


def with_forward(side: int, cache: int) -> int:
    """``side`` carrying the replayed compute-stream ``cache`` at the loss
    (:attr:`SideBytes.forward`), which :func:`loss_floor`'s high end reads."""
    if not isinstance(side, SideBytes):
        return side
    made = SideBytes(int(side), side.init, side.unit, side.root, side.logits, side.pre, cache)
    _carry(made, side)
    return made


def _carry(made: SideBytes, side: SideBytes) -> None:
    """The attributes :class:`SideBytes`' constructor does not take, copied over."""
    made.wrap, made.fsdp2, made.ahead = side.wrap, side.fsdp2, side.ahead
    made.grads, made.grads_at = side.grads, side.grads_at


def grad_pool_free(side: int, moment: str | None) -> int:
    """Bytes of FSDP1's post-backward stream pool that are reserved but free at ``moment``
    (0 where no moment is given, or the gradients are live then).

    ``torch/distributed/fsdp/_runtime_utils.py`` ``_post_backward_hook`` runs
    ``_reduce_grad`` under ``state._post_backward_stream``, where
    ``_get_reduce_scatter_tensors`` makes the sharded gradient
    (``new_sharded_grad = torch.empty_like(chunks[0])``): its block belongs to that
    stream's pool. ``_accumulate_sharded_grad`` keeps it as ``_saved_grad_shard`` and
    ``FlatParamHandle.prepare_gradient_for_optim`` (``_flat_param.py``) makes it the
    flat parameter's ``.grad`` — no copy to the compute stream. The step's
    ``zero_grad()`` (``set_to_none=True``) frees it back to that pool, which only the
    next backward's reduce-scatters reuse and nothing releases (no ``empty_cache``): from
    the second step on the pool stays reserved through the forward and the loss, beside
    the compute stream's own blocks."""
    if not isinstance(side, SideBytes) or not side.grads or moment is None:
        return 0
    return 0 if moment in side.grads_at else side.grads


def loss_floor(side: int, at_loss: tuple[int, int]) -> tuple[int, int] | None:
    """(low, high) reserved while the eager loss's backward runs, when its fp32 T × V
    requests are larger than every block FSDP1's construction left cached; None when
    they are not (the construction cache is then reused as :func:`_compute_cache` says).

    The caching allocator serves a request from the smallest free block of its pool at
    least as large (``c10/cuda/CUDACachingAllocator.cpp`` ``get_free_block``:
    ``pool.blocks.lower_bound``), else from a new segment: blocks of a layer unit's
    flat parameter, its broadcast buckets and the root unit's are all smaller than such
    a request, so the whole construction cache stays reserved beside the loss. The loss
    itself leaves one block more: ``LlamaForCausalLM``'s ``logits.float()`` frees the
    16-bit logits, and the fp32 tensors that follow (the log-probs' gradient, then the
    logits' gradient in ``log_softmax_backward``) are twice its size, so each takes a
    segment of its own while that block waits for the 16-bit gradient the cast's
    backward makes. ``at_loss`` is the allocated (low, high) at ``backward.start``.

    With a replayed forward (:attr:`SideBytes.forward`) the high end is the loss's
    allocated bytes plus that replay's cache — the construction cache the forward left,
    the checkpointed layers' working set and the pieces their kept outputs were cut from,
    and the 16-bit block (:mod:`engine.allocator.checkpointed`) — plus the side pools'
    layer units, which nothing frees on the unshard stream while the loss runs: the
    in-flight units the gathered rows count and at most one more (``ReserveModel.fsdp1``).
    The low end stays the construction cache and the block alone: the step's own
    requests may reuse the forward's blocks in an order the replay does not follow, and
    a job at its card's capacity frees every wholly free cached segment and retries
    (``CUDACachingAllocator`` ``release_cached_blocks``) before its peak is read."""
    if not isinstance(side, SideBytes):
        return None
    block, request = side.logits
    if request <= max(side.root, side.unit):
        return None
    low, high = at_loss[0] + side.init[0] + block, at_loss[1] + side.init[1] + block
    if side.forward:  # the root and the prefetched unit are live in the pools (ahead)
        pools = max(0, int(side) - side.root - side.ahead) + side.unit
        high = max(high, at_loss[1] + side.forward + pools)
    return low, high


def fsdp1_init_cache(root: int, unit: int) -> tuple[int, int]:
    """(low, high) bytes FSDP1's wrapping leaves in the compute stream's pool, from the
    root unit's and the largest layer unit's unsharded bytes.

    ``torch/distributed/fsdp/_init_utils.py`` ``_init_param_handle_from_module`` moves each
    unit's parameters to the device (or materializes them there with ``param_init_fn``),
    broadcasts them when ``sync_module_states`` (``_sync_module_params_and_buffers``:
    ``_broadcast_coalesced`` concatenates them into buckets of 250 MiB), then
    ``FlatParamHandle`` concatenates them into one flat parameter and ``shard()`` keeps
    a clone of the rank's chunk: the original tensors, the broadcast bucket and the full
    flat parameter are freed on the default stream, the next unit reuses those blocks
    (same sizes), and nothing releases them (Answer.AI's fsdp_qlora ``train.py`` calls
    ``empty_cache`` after loading, not after wrapping — its QLoRA 7B run reports
    ``reserved_after_model_wrap`` 3.72 GiB, about 1.5 GiB over its sharded states).
    ``torch.cuda.reset_peak_memory_stats`` sets the peak to what is reserved then, so
    the cache counts toward ``max_memory_reserved`` unless the step reuses it.

    Low: a layer unit's originals and flat parameter (2 × unit) and the root's flat
    parameter, the root's originals served from the layers' cached blocks (best fit) and
    no broadcast. High: a layer unit's originals, bucket and flat parameter (3 × unit) and
    the root's originals, flat parameter and its lm_head bucket (2.5 × root)."""
    return 2 * unit + root, 3 * unit + (5 * root) // 2


class ReserveModel(NamedTuple):
    """How a plan's reserve is worked out (:func:`engine.ledger.peaks.runtime.reserve_factors`).

    ``fraction``: the old pessimistic model, ``frag`` then being the band over the whole
    allocated peak; otherwise ``frag`` is the compute-stream fragmentation of the
    transient bytes and ``side`` the side-stream multiplier. ``expandable``: whether
    ``expandable_segments`` is on. ``ceiling``: the capacity PyTorch can allocate
    (None: no bound) — the allocator frees its cache and retries before reserving more,
    so reserved never passes it (unless the unreleasable part alone does)."""

    fraction: bool
    frag: tuple[float, float]
    side: tuple[float, float]
    expandable: bool
    ceiling: int | None = None
    fsdp1: bool = False
    """FSDP1 all-gathers into each flat parameter's padded unsharded storage on its
    unshard stream and frees it back to that stream's pool (``_runtime_utils._unshard``;
    no copy-out to the compute stream as FSDP2's ``foreach_all_gather_copy_out``), so
    the gathered rows already hold that pool; ``FlatParamHandle._free_unsharded_flat_param``
    first records the compute stream on the block, so a CPU running ahead (by at most
    the two free events ``limit_all_gathers`` allows) can find one unit not yet
    reusable: the side pools add 0 to one layer unit (:class:`SideBytes` ``unit``)
    instead of ``side`` × the rows; the compute stream keeps the construction cache
    (:func:`fsdp1_init_cache`)."""


class AtLoss(tuple[int, int]):
    """The allocated (low, high) at the loss's backward (``backward.start``), carrying
    ``layers``: the (low, high) at the last layer's backward (``backward.layers``), the
    other moment before any reduce-scatter has run — where FSDP2's reduce-scatter stream
    pool is as free as at the loss (:func:`~engine.allocator.fsdp2_pools.fsdp2_extra`
    ``before_rs``). A plain pair where no such moment is known."""

    layers: tuple[int, int] | None

    def __new__(cls, loss: tuple[int, int], layers: tuple[int, int] | None = None) -> AtLoss:
        made = super().__new__(cls, loss)
        made.layers = layers
        return made


def before_rs_ends(
    at_loss: tuple[int, int], low: int, high: int, loss: tuple[bool, bool]
) -> tuple[bool, bool]:
    """Whether each end of the range is a moment before any reduce-scatter: the loss's
    backward, or the last layer's (:class:`AtLoss` ``layers``)."""
    layers = getattr(at_loss, "layers", None)
    if layers is None:
        return loss
    return loss[0] or layers[0] >= low, loss[1] or layers[1] >= high


def reserved_extra(
    m: ReserveModel,
    low: int,
    high: int,
    steady: tuple[int, int] | None = None,
    side: int = 0,
    at_loss: tuple[int, int] | None = None,
    moment: str | None = None,
) -> tuple[int, int]:
    """(low, high) of reserved − allocated over an allocated range ``low``–``high`` whose
    persistent part is ``steady`` (None: all of it, so no transient) and whose stage
    holds ``side`` bytes of gathered units and buckets; ``at_loss``: the allocated range
    at the loss's backward when this range is the backward phase's (:func:`loss_floor`);
    ``moment``: the moment the range peaks at (None: not known), for FSDP1's freed
    gradients (:func:`grad_pool_free`)."""
    if m.fraction:
        return int(low * m.frag[0]), int(high * m.frag[1])
    t_low, t_high = _transient(low, high, steady)
    extra = _compute_cache(m, (t_low, t_high), side)
    pools = getattr(side, "fsdp2", NO_POOLS)
    if pools.ag and not m.fsdp1:  # FSDP2: its streams' pools (fsdp2_pools)
        loss = None if at_loss is None else (at_loss[0] >= low, at_loss[1] >= high)
        free = None if at_loss is None or loss is None else before_rs_ends(at_loss, low, high, loss)
        extra = fsdp2_extra(m.frag, m.side, pools, (t_low, t_high), loss, free)
    elif not m.fsdp1:
        extra = (extra[0] + int(side * m.side[0]), extra[1] + int(side * m.side[1]))
    else:  # FSDP1: at most one unit more than the rows count (see ReserveModel.fsdp1)
        pre = getattr(side, "pre", (0, 0))  # the pre-unshard stream's pool (SideBytes.pre)
        grads = grad_pool_free(side, moment)  # the post-backward stream's freed gradients
        extra = (extra[0] + pre[0] + grads, extra[1] + getattr(side, "unit", 0) + pre[1] + grads)
        floor = None if at_loss is None or m.expandable else loss_floor(side, at_loss)
        if floor is not None:  # the pre-unshard and post-backward pools are streams' own
            grads = grad_pool_free(side, "backward.start")
            extra = (
                max(extra[0], floor[0] - low + pre[0] + grads),
                max(extra[1], floor[1] - high + pre[1] + grads),
            )
    if m.ceiling is None:
        return extra
    stuck = stuck_extra(m, low, high, steady)
    high_extra = min(extra[1], max(stuck[1], m.ceiling - high))
    # the row's low never above its high (each end capped by its own room)
    return min(extra[0], max(stuck[0], m.ceiling - low), high_extra), high_extra


def _compute_cache(m: ReserveModel, t: tuple[int, int], side: int) -> tuple[int, int]:
    """(low, high) the compute stream keeps beyond its live tensors: the fragmentation of
    the transient bytes, or — when more — what is left of a construction cache
    (:class:`SideBytes` ``init``) after the step's own compute-stream transient (the
    transient but the side streams' units and buckets) reuses its blocks."""
    init = getattr(side, "init", (0, 0))
    frag = (int(t[0] * m.frag[0]), int(t[1] * m.frag[1]))
    if init == (0, 0):
        return frag
    low = max(frag[0], init[0] - max(0, t[0] - side))
    return low, max(low, frag[1], init[1] - max(0, t[1] - side))


def stuck_extra(
    m: ReserveModel, low: int, high: int, steady: tuple[int, int] | None = None
) -> tuple[int, int]:
    """(low, high) of the reserve a free-and-retry cannot give back: what the fit test
    adds to the live tensors. The side-stream caches are wholly free segments between
    uses, so they are released; the compute stream's split segments are not (with
    expandable segments, at most a partial page per stream pool). Under the ``fraction``
    model the whole reserve, as before."""
    if m.fraction:
        return reserved_extra(m, low, high)
    t_low, t_high = _transient(low, high, steady)
    if m.expandable:
        return 0, min(int(t_high * m.frag[1]), STREAM_POOLS * LARGE_BUFFER)
    return int(t_low * m.frag[0]), int(t_high * m.frag[1])


def share_bound(m: ReserveModel) -> float:
    """The most :func:`stuck_extra` grows per allocated byte (for the layout search's
    slack and cross-EP bounds)."""
    return max(m.frag[0], m.frag[1], 0.0)


def _transient(low: int, high: int, steady: tuple[int, int] | None) -> tuple[int, int]:
    if steady is None:
        return 0, 0
    return max(0, low - steady[0]), max(0, high - steady[1])
