"""The plan's parallel layout on a fake process group of its world size.

``init_process_group(backend="fake")`` makes every collective return at once with
correctly shaped outputs, so one process runs as rank R of N. Applied before the
model is materialised (on meta, as torchtitan does): DTensor TP per decoder layer
(transformers' column/row plan), then FSDP2 ``fully_shard`` per decoder layer and on
the root, on a 1-D mesh (FSDP2), a 2-D ``(replicate, shard)`` mesh (HSDP) or the dp
dimension of a ``(dp, tp)`` mesh. DDP wraps after materialising (``wrap_ddp``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

from engine.ledger.sharding import shard_group_size
from engine.plan import Plan
from engine.trace.dtypes import casts_compute, compute_dtype, torch_dtype

TP_PLAN: dict[str, str] = {
    "self_attn.q_proj": "colwise",
    "self_attn.k_proj": "colwise",
    "self_attn.v_proj": "colwise",
    "self_attn.o_proj": "rowwise",
    "mlp.gate_proj": "colwise",
    "mlp.up_proj": "colwise",
    "mlp.down_proj": "rowwise",
}
"""Megatron-style TP of one decoder layer, as transformers' ``base_model_tp_plan``
writes it for Llama-like families: q/k/v and gate/up split their outputs, o and down
their inputs, so each layer needs one all-reduce after attention and one after the MLP."""


@dataclass(frozen=True, slots=True)
class Layout:
    """How the model was laid out: the stack's name, the mesh, the tracker it needs."""

    name: str
    mesh: tuple[int, ...]
    sharded: bool  # FSDP2 / HSDP: FSDPMemTracker; else MemTracker
    ddp: bool
    loss_parallel: bool = False  # TP: the logits are vocabulary-sharded DTensors


@contextmanager
def fake_world(world_size: int, rank: int) -> Iterator[None]:
    """A fake process group: this process is ``rank`` of ``world_size``."""
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group(backend="fake", store=FakeStore(), rank=rank, world_size=world_size)
    try:
        yield
    finally:
        dist.destroy_process_group()


def _ranks_per_node(plan: Plan) -> int:
    return plan.parallelism.ranks_per_node or plan.hardware.gpus_per_node


def _module_name(model: Any, module: Any) -> str:
    return str(next(name for name, m in model.named_modules() if m is module))


def _apply_tp(model: Any, layers: list[Any], tp_mesh: Any) -> None:
    """TP per decoder layer, plus the vocabulary-parallel embedding and output head
    (the logits stay sharded over the vocabulary for the loss-parallel cross-entropy)."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    styles = {"colwise": ColwiseParallel, "rowwise": RowwiseParallel}
    for layer in layers:
        parallelize_module(layer, tp_mesh, {k: styles[v]() for k, v in TP_PLAN.items()})
    embed, head = model.get_input_embeddings(), model.get_output_embeddings()
    parallelize_module(
        model,
        tp_mesh,
        {
            _module_name(model, embed): RowwiseParallel(
                input_layouts=Replicate(), output_layouts=Replicate()
            ),
            _module_name(model, head): ColwiseParallel(
                output_layouts=Shard(-1), use_local_output=False
            ),
        },
    )


def _mp_policy(plan: Plan) -> Any:
    from torch.distributed.fsdp import MixedPrecisionPolicy

    if not casts_compute(plan):
        return MixedPrecisionPolicy()
    return MixedPrecisionPolicy(
        param_dtype=compute_dtype(plan),
        reduce_dtype=torch_dtype(plan.method.precision.grad_dtype),
    )


def _other_dtype_modules(layer: Any) -> list[Any]:
    """Submodules of a layer whose own parameters are in another dtype than the rest of
    the layer (DeepSeek's fp32 router, ``DeepseekV3TopkRouter.weight``): FSDP2 groups
    refuse mixed dtypes (``FSDPParamGroup._init_mp_dtypes`` "uniform original parameter
    dtype"), so users shard them as their own unit, as this does."""
    counts: dict[Any, int] = {}
    for p in layer.parameters():
        counts[p.dtype] = counts.get(p.dtype, 0) + p.numel()
    if len(counts) < 2:
        return []
    main = max(counts, key=lambda d: counts[d])
    return [
        m
        for m in layer.modules()
        if m is not layer
        and any(True for _ in m.parameters(recurse=False))
        and all(p.dtype != main for p in m.parameters(recurse=False))
    ]


def _fully_shard(plan: Plan, model: Any, layers: list[Any], mesh: Any) -> None:
    from torch.distributed.fsdp import fully_shard

    knobs = plan.parallelism.knobs
    policy = _mp_policy(plan)
    raf = knobs.fsdp_reshard_after_forward
    for layer in layers:
        for odd in _other_dtype_modules(layer):
            fully_shard(odd, mesh=mesh, mp_policy=policy, reshard_after_forward=raf)
        fully_shard(layer, mesh=mesh, mp_policy=policy, reshard_after_forward=raf)
    fully_shard(model, mesh=mesh, mp_policy=policy, reshard_after_forward=raf)
    ahead = knobs.fsdp_prefetch_units
    if ahead > 1:  # FSDP2 prefetches one unit implicitly; more is explicit
        for i, layer in enumerate(layers):
            layer.set_modules_to_forward_prefetch(layers[i + 1 : i + 1 + ahead])
            layer.set_modules_to_backward_prefetch(layers[max(0, i - ahead) : i][::-1])


def lay_out(plan: Plan, model: Any, layers: list[Any]) -> Layout:
    """Apply TP and FSDP2 / HSDP to the meta model (DDP comes after materialising)."""
    par = plan.parallelism
    dp, tp = par.dp, par.tp
    if par.strategy == "fsdp2_hsdp":
        shard = shard_group_size(par, dp, _ranks_per_node(plan))
        mesh = init_device_mesh("cpu", (dp // shard, shard), mesh_dim_names=("replicate", "shard"))
        _fully_shard(plan, model, layers, mesh)
        return Layout(f"FSDP2 HSDP ({dp // shard} × {shard})", (dp // shard, shard), True, False)
    if tp > 1:
        mesh = init_device_mesh("cpu", (dp, tp), mesh_dim_names=("dp", "tp"))
        _apply_tp(model, layers, mesh["tp"])
        if par.strategy == "fsdp2":
            _fully_shard(plan, model, layers, mesh["dp"])
            return Layout(f"FSDP2 × {dp} + TP × {tp}", (dp, tp), True, False, True)
        return Layout(f"TP × {tp}", (dp, tp), False, False, True)
    if par.strategy == "fsdp2":
        mesh = init_device_mesh("cpu", (dp,), mesh_dim_names=("dp",))
        _fully_shard(plan, model, layers, mesh)
        return Layout(f"FSDP2 × {dp}", (dp,), True, False)
    if dp > 1:
        return Layout(f"DDP × {dp}", (dp,), False, True)
    return Layout("one rank, no wrapper", (1,), False, False)


class _NoRebuild:
    """DDP's reducer with bucket rebuilding switched off.

    After the first step DDP re-orders its buckets by gradient arrival, which reads a
    synced index tensor's data — impossible on fake tensors. The buckets keep their
    first-step order instead; their number and total size do not change."""

    def __init__(self, reducer: Any) -> None:
        self._reducer = reducer

    def _rebuild_buckets(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reducer, name)


def wrap_ddp(plan: Plan, model: Any, on_bucket: Any) -> Any:
    """Wrap the materialised model in DDP with the plan's bucket size.

    The construction-time checks that read parameter data (shape verification, the
    rank-0 broadcast) are skipped — every fake rank is identical — and the all-reduce
    is a comm hook that returns the bucket in place (NCCL all-reduces in place), calling
    ``on_bucket`` so the tracker can label the bucket's storage."""
    import torch.nn.parallel.distributed as ddp_module
    from torch.nn.parallel import DistributedDataParallel

    saved = (ddp_module._verify_param_shape_across_processes, ddp_module._sync_module_states)
    ddp_module._verify_param_shape_across_processes = lambda *a, **k: None
    ddp_module._sync_module_states = lambda *a, **k: None
    try:
        wrapped = DistributedDataParallel(
            model, bucket_cap_mb=plan.parallelism.knobs.ddp_bucket_cap_mb
        )
    finally:
        ddp_module._verify_param_shape_across_processes, ddp_module._sync_module_states = saved

    def in_place(state: Any, bucket: Any) -> Any:
        buffer = bucket.buffer()
        on_bucket(buffer)
        future: Any = torch.futures.Future()
        future.set_result(buffer)
        return future

    # DDP checks the hook's annotations as objects, not the strings of postponed ones.
    in_place.__annotations__ = {
        "bucket": dist.GradBucket,
        "return": torch.futures.Future[torch.Tensor],
    }
    wrapped.register_comm_hook(None, in_place)
    wrapped.reducer = _NoRebuild(wrapped.reducer)
    return wrapped
