"""MemTracker over DeepSpeed's engine: its own buffers put in the trace's categories.

MemTracker sees every storage an aten op makes, but it names them by *when* they were
made (forward: activation, backward: temporary, inside ``optimizer.step``: optimizer).
DeepSpeed makes its persistent buffers itself, so after each call that makes one (the
engine's construction, ``setup_buckets``, ``copy_grads_in_partition``, ZeRO-3's
``fetch_sub_module``) the storages are re-tagged from DeepSpeed's own attributes:

- the bf16 flat groups / ZeRO-3 partitions and persistent parameters → ``params``;
- gathered ZeRO-3 parameters → ``params_unsharded`` (the ledger's gathered group);
- the gradient partition (``grads_in_partition``, ``averaged_gradients``,
  ``grad_partitions_flat_buffer``) → ``grads``;
- the IPG reduce buckets → ``Other``, which the collector reports as ``grad_buckets``;
- the fp32 master partition → optimizer (the collector counts it as optimizer state,
  the ledger's ``hbm.master_weights`` is in its optimizer group too).

``engine.step`` runs as one optimizer region, so the step's flat fp32 gradient and norm
temporaries are ``optimizer_temp`` as in the ledger's ``hbm.optimizer_step.*`` rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.distributed._tools.fsdp2_mem_tracker import _FSDPRefType
from torch.distributed._tools.mem_tracker import _MemRefType

from engine.trace.tracker import PlainTracker

GATHERED = _FSDPRefType.UNSHARDED_PARAM
"""A gathered ZeRO-3 parameter, under FSDPMemTracker's name (the trace's
``params_unsharded`` category)."""


def _tensors(value: Any) -> Iterator[Any]:
    """Tensors in an attribute: a tensor, or lists / dicts / bucket objects of them."""
    if torch.is_tensor(value):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)
    elif hasattr(value, "buffer"):
        yield from _tensors(value.buffer)


class DeepSpeedTracker(PlainTracker):
    """PlainTracker that knows DeepSpeed's buffers (see the module doc)."""

    def __init__(self) -> None:
        super().__init__()
        self._ref_class = [*_MemRefType, GATHERED]
        self.zero: Any = None
        self.module: Any = None
        self._stepping = False

    def _track(self, reftype: Any, t: Any) -> None:
        """Meta tensors hold no memory: ZeRO-1/2 keeps a meta copy of every parameter
        (``stage_1_and_2.py`` ``round_robin_bit16_meta``), which MemTracker would count."""
        if t.device.type != "meta":
            super()._track(reftype, t)

    def _register_global_optimizer_hook(self) -> None:
        """The inner optimizer's hooks, except that inside ``engine.step`` the whole
        call stays an optimizer region (DeepSpeed works before and after the inner step)."""
        super()._register_global_optimizer_hook()
        pre, post = self._optimizer_hook_handles  # type: ignore[has-type]
        post.remove()

        def _post(optimizer: Any, args: Any, kwargs: Any) -> None:
            self._track_optimizer_states(_MemRefType.OPT, optimizer)
            self._in_opt = self._stepping

        from torch.optim.optimizer import register_optimizer_step_post_hook

        self._optimizer_hook_handles = (pre, register_optimizer_step_post_hook(_post))

    @contextmanager
    def engine_step(self) -> Iterator[None]:
        """``engine.step()``: one optimizer region from its start to its end."""
        self._stepping = self._in_opt = True
        try:
            yield
        finally:
            self._stepping = self._in_opt = False
            self.retag()

    def _tag(self, value: Any, reftype: Any) -> None:
        for t in _tensors(value):
            if t.numel():
                self._update_and_maybe_create_winfos(t, reftype)

    def retag(self) -> None:
        """Re-tag DeepSpeed's buffers from its optimizer's attributes (module doc)."""
        zero = self.zero
        if zero is None:
            return
        self._tag(getattr(zero, "bit16_groups_flat", None), _MemRefType.PARAM)
        self._tag(getattr(zero, "fp16_partitioned_groups_flat", None), _MemRefType.PARAM)
        self._tag(getattr(zero, "lp_param_buffer", None), _MemRefType.PARAM)
        self._tag(getattr(zero, "single_partition_of_fp32_groups", None), _MemRefType.OPT)
        self._tag(getattr(zero, "fp32_partitioned_groups_flat", None), _MemRefType.OPT)
        self._tag(getattr(zero, "grads_in_partition", None), _MemRefType.GRAD)
        self._tag(getattr(zero, "averaged_gradients", None), _MemRefType.GRAD)
        self._tag(getattr(zero, "grad_partitions_flat_buffer", None), _MemRefType.GRAD)
        self._tag(getattr(zero, "ipg_buckets", None), _MemRefType.OTH)
        if self.module is not None:
            self._tag_params()

    def _tag_params(self) -> None:
        for p in self.module.parameters():
            part = getattr(p, "ds_tensor", None)
            if part is None:
                self._tag(p, _MemRefType.PARAM)
            else:
                self._tag(part, _MemRefType.PARAM)
                gathered = str(getattr(p.ds_status, "name", "")) != "NOT_AVAILABLE"
                if gathered and p.numel():
                    self._tag(p.data, _MemRefType.PARAM if p.ds_persist else GATHERED)
            if p.grad is not None:
                self._tag(p.grad, _MemRefType.GRAD)


RETAG_AFTER: tuple[tuple[str, str, str], ...] = (
    ("deepspeed.runtime.zero.stage_1_and_2", "DeepSpeedZeroOptimizer", "setup_buckets"),
    ("deepspeed.runtime.zero.stage_1_and_2", "DeepSpeedZeroOptimizer", "copy_grads_in_partition"),
    (
        "deepspeed.runtime.zero.partitioned_param_coordinator",
        "PartitionedParameterCoordinator",
        "fetch_sub_module",
    ),
)
"""(module, class, method) of DeepSpeed calls that make a buffer to re-tag after."""


@contextmanager
def retag_after_calls(tracker: DeepSpeedTracker) -> Iterator[None]:
    """Wrap :data:`RETAG_AFTER` so each call re-tags on return; undone on exit."""
    import importlib

    undo: list[tuple[Any, str, Any]] = []
    for mod_name, cls_name, method in RETAG_AFTER:
        cls = getattr(importlib.import_module(mod_name), cls_name)
        original = getattr(cls, method)

        def wrapped(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
            out = _original(*args, **kwargs)
            tracker.retag()
            return out

        setattr(cls, method, wrapped)
        undo.append((cls, method, original))
    try:
        yield
    finally:
        for cls, method, original in undo:
            setattr(cls, method, original)
