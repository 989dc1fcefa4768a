"""FSDP1's wrap replayed through the allocator simulator: the cache its construction
leaves on the compute stream, from each unit's parameter sizes.

Why a replay: what FSDP1's construction leaves cached depends on the order and sizes of
its requests (which block each later request reuses), not on their sum. The requests,
per unit and in wrap order (children before the root), follow torch's
``torch/distributed/fsdp/_init_utils.py`` ``_init_param_handle_from_module``:

1. ``_move_module_to_device``: each parameter not yet managed is moved to the device
   (one request per tensor);
2. with ``sync_module_states``, ``_sync_module_params_and_buffers`` →
   ``_sync_params_and_buffers(..., PARAM_BROADCAST_BUCKET_SIZE = 250 MiB)`` →
   ``dist._broadcast_coalesced``: tensors are grouped in order into buckets, a bucket
   closing once it holds at least 250 MiB (``compute_bucket_assignment_by_size``); each
   bucket is flattened into one tensor, and at most two are in flight
   (``torch/csrc/distributed/c10d/comm.cpp`` ``broadcast_coalesced``), freed once
   copied back;
3. ``FlatParamHandle`` concatenates the parameters into the flat parameter
   (``flatten_tensors_into_flat_param``), and ``shard()`` keeps a padded clone of the
   rank's chunk (``_get_shard``) and frees the flat parameter's storage
   (``_resize_(0)``); under NO_SHARD the flat parameter is kept whole;
4. the original parameters are freed when the function returns.

Nothing calls ``empty_cache`` afterwards (Answer.AI's ``train.py`` does so after
loading, before the wrap), and ``reset_peak_memory_stats`` sets the peak to what is
reserved then, so this cache counts toward ``max_memory_reserved`` unless the step
reuses it.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from itertools import count

from engine.allocator.simulator import Simulator
from engine.units import MiB

BROADCAST_BUCKET = 250 * MiB
"""``torch/distributed/fsdp/_init_utils.py`` ``PARAM_BROADCAST_BUCKET_SIZE``."""
IN_FLIGHT = 2
"""Broadcast buckets in flight at once (``comm.cpp`` ``broadcast_coalesced``)."""


def buckets(sizes: Sequence[int], limit: int = BROADCAST_BUCKET) -> list[int]:
    """The flattened bucket sizes of tensors of ``sizes`` (bytes, in order): a bucket
    closes once it holds at least ``limit`` bytes."""
    out: list[int] = []
    acc = 0
    for n in sizes:
        acc += n
        if acc >= limit:
            out.append(acc)
            acc = 0
    if acc:
        out.append(acc)
    return out


@lru_cache(maxsize=256)
def wrap_cache(
    units: tuple[tuple[int, ...], ...], world: int, sync: bool, offload: bool = False
) -> int:
    """Bytes cached but unused after FSDP1 wrapped ``units`` (each its parameters' byte
    sizes in registration order, in wrap order) over ``world`` ranks (1: NO_SHARD),
    broadcasting the states when ``sync``; the shards (or whole flat parameters) stay
    live, as they do in training — unless ``offload``: ``CPUOffload(offload_params=True)``
    then moves each shard to the CPU (``flat_param_to(cpu)``) and its block is freed."""
    sim = Simulator()
    replay_wrap(sim, units, world, sync, offload)
    return sim.cached_free()


def replay_wrap(
    sim: Simulator,
    units: tuple[tuple[int, ...], ...],
    world: int,
    sync: bool,
    offload: bool = False,
) -> None:
    """FSDP1's construction requests (:func:`wrap_cache`) replayed into ``sim``, whose
    block ids from ``-1`` down are taken here (a later replay of the step keeps the
    shards and the cache as the wrap left them)."""
    ids = count(1)

    def new() -> int:
        return -next(ids)

    for params in units:
        originals = [new() for _ in params]
        for i, n in zip(originals, params, strict=True):
            sim.malloc(i, n)
        if sync:
            flying: list[int] = []
            for n in buckets(params):
                if len(flying) >= IN_FLIGHT:
                    sim.free(flying.pop(0))
                flying.append(new())
                sim.malloc(flying[-1], n)
            for i in flying:
                sim.free(i)
        flat = new()
        total = sum(params)
        sim.malloc(flat, total)
        if world > 1:
            shard = new()
            sim.malloc(shard, -(-total // world))  # the padded shard, kept
            sim.free(flat)
            if offload:
                sim.free(shard)
        elif offload:
            sim.free(flat)
        for i in originals:
            sim.free(i)
