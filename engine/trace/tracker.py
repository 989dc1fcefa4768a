"""PyTorch's memory trackers with the trace's fixes, and phase bookkeeping.

``MemTracker`` (plain and DDP modules, DTensor TP) and ``FSDPMemTracker`` (FSDP2)
attribute every storage to a category after every aten op. Three changes make them
right and fast for a training step (shared/reference/tracing.md):

- only the **global peak** is kept, per phase, instead of a snapshot per active module
  after every op (O(ops × modules): 103 s → 22 s on a 135M model);
- gradient hooks go on parameters that **require grad** only (a hook on a frozen LoRA
  base weight raises);
- ops run by DTensor's **sharding propagation** are not tracked (see ``patches.py``).

Phases are marked by the step runner: :meth:`begin_phase` starts a new peak at what is
live now, :meth:`end_phase` returns the phase's peak, where it happened and what is
left. Categories leave here under the reference cases' names (``result.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.distributed._tools.common_utils import get_untyped_storages
from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
from torch.distributed._tools.mem_tracker import MemTracker, _MemRefType, _UpdateType

from engine.trace.alloc_log import ALL_GATHER_STREAM, REDUCE_SCATTER_STREAM, AllocLog
from engine.trace.patches import propagating
from engine.trace.result import Snapshot

_TRACKER_CATEGORY: dict[str, str] = {
    "Parameter": "params",
    "Sharded Param": "params",
    "Unsharded Param": "params_unsharded",
    "Buffer": "buffers",
    "Gradient": "grads",
    "Sharded Grad": "grads",
    "Unsharded Grad": "grads_unsharded",
    "Activation": "activations",
    "Temp": "temp",
    "All Gather": "all_gather",
    "Reduce Scatter": "reduce_scatter",
    "Optstate": "optimizer",
    "OptState": "optimizer",
    "Inputs": "inputs",
    "Other": "other",
}
"""Tracker reference type (its ``.value``) → trace category. ``Other`` holds what the
runner registered itself: the inputs and, under DDP, the gradient buckets."""

_TOTAL = "Total"

_ALL_GATHER = "All Gather"
"""The FSDPMemTracker reference type (its ``.value``) of an all-gather output, which
FSDP2 makes on its all-gather copy-in stream (``alloc_log.py``)."""
_REDUCE_SCATTER_OP = torch.ops.c10d._reduce_scatter_base_.default
"""The collective whose output FSDP2 makes on its reduce-scatter stream
(``_fsdp_collectives.foreach_reduce``: ``reduce_output`` inside
``device_handle.stream(reduce_scatter_stream)``; the *input* is made on the current
stream before it, so it stays on the default stream)."""


@dataclass(frozen=True, slots=True)
class PhaseMark:
    """A phase's peak (raw tracker categories), its moment and what it left live."""

    peak: dict[str, int]
    end: dict[str, int]
    moment: str


def _flat(snap: dict[Any, dict[Any, int]]) -> dict[str, int]:
    """Sum a per-device tracker snapshot into trace categories (all devices are one)."""
    out: dict[str, int] = {}
    for dev_snap in snap.values():
        for key, value in dev_snap.items():
            if key == _TOTAL or not value:
                continue
            name = _TRACKER_CATEGORY.get(str(getattr(key, "value", key)), str(key))
            out[name] = out.get(name, 0) + int(value)
    return out


class _PhaseTracking:
    """Mixin over a MemTracker: per-phase global peak, moment, and the fixes above."""

    def _trace_init(self) -> None:
        self._phase_peak = -1
        self._phase_snap: dict[str, int] = {}
        self._phase_moment = ""
        self._last_op = ""
        self.alloc_log = AllocLog()

    def _update_snap(
        self,
        u_type: Any,
        winfo: Any,
        old_mem_consumed: int | None = None,
        old_reftype: Any = None,
    ) -> None:
        """The tracker's own bookkeeping, plus the allocation log (``alloc_log.py``):
        a new storage is an alloc, a dying one a free, a resize both; a storage the
        FSDPMemTracker re-marks as an all-gather output moves to the all-gather stream."""
        super()._update_snap(u_type, winfo, old_mem_consumed, old_reftype)  # type: ignore[misc]
        nbytes = int(winfo.size) * int(winfo.element_size)
        if u_type == _UpdateType.ADD:
            self.alloc_log.alloc(id(winfo), nbytes)
        elif u_type == _UpdateType.DEL:
            self.alloc_log.free(id(winfo))
        elif u_type == _UpdateType.SIZE:
            self.alloc_log.resize(id(winfo), nbytes)
        elif u_type == _UpdateType.REF and str(getattr(winfo.reftype, "value", "")) == _ALL_GATHER:
            self.alloc_log.retag(id(winfo), ALL_GATHER_STREAM)

    def _current_total(self) -> int:
        snap: dict[Any, dict[Any, int]] = self._curr_mem_snap  # type: ignore[attr-defined]
        return sum(int(d.get(_TOTAL, 0)) for d in snap.values())

    def _moment(self) -> str:
        mods = self._mod_tracker  # type: ignore[attr-defined]
        parents = [p for p in mods.parents if p != "Global"]
        where = max(parents, key=lambda p: p.count("."), default="the model")
        direction = "backward" if mods.is_bw else "forward"
        return f"{direction} of {where}, at {self._last_op}"

    def _update_peak_stats(self, peak_state: Any) -> None:
        total = self._current_total()
        if total > self._phase_peak:
            self._phase_peak = total
            self._phase_snap = _flat(self._curr_mem_snap)  # type: ignore[attr-defined]
            self._phase_moment = self._moment()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if propagating():
            return func(*args, **(kwargs or {}))
        self._last_op = str(getattr(func, "__name__", func))
        out = super().__torch_dispatch__(func, types, args, kwargs)  # type: ignore[misc]
        if func is _REDUCE_SCATTER_OP and args:
            self._retag_storages(args[0], REDUCE_SCATTER_STREAM)
        return out

    def _retag_storages(self, tensor: Any, stream: int) -> None:
        """Move the tracked storages behind ``tensor`` to ``stream`` in the log."""
        winfos = self._WINFO  # type: ignore[attr-defined]
        for st in get_untyped_storages(tensor):
            winfo, _ = winfos.get(st, (None, None))
            if winfo is not None:
                self.alloc_log.retag(id(winfo), stream)

    def begin_phase(self) -> None:
        """Start a phase: its peak so far is what is live now."""
        self._phase_peak = self._current_total()
        self._phase_snap = _flat(self._curr_mem_snap)  # type: ignore[attr-defined]
        self._phase_moment = "the phase's start"

    def end_phase(self) -> PhaseMark:
        """The phase's peak, where it happened, and what is live at its end."""
        end = _flat(self._curr_mem_snap)  # type: ignore[attr-defined]
        return PhaseMark(dict(self._phase_snap), end, self._phase_moment)

    def storage_bytes(self, tensors: list[Any]) -> int:
        """Tracked (rounded) bytes of the distinct storages behind ``tensors``."""
        seen: dict[int, int] = {}
        winfos = self._WINFO  # type: ignore[attr-defined]
        for t in tensors:
            for st in get_untyped_storages(t):
                winfo, _ = winfos.get(st, (None, None))
                if winfo is not None:
                    seen[id(st)] = int(winfo.mem_consumed)
        return sum(seen.values())

    def mark_other(self, tensor: Any) -> None:
        """Re-categorise a storage as ``Other`` (DDP's buckets: see ``_flat``)."""
        self._update_and_maybe_create_winfos(tensor, _MemRefType.OTH)  # type: ignore[attr-defined]


class PlainTracker(_PhaseTracking, MemTracker):
    """MemTracker for unsharded, DDP and TP-only models."""

    def __init__(self) -> None:
        super().__init__()
        self._trace_init()

    def _track_module_params_and_buffers(
        self, module: Any, install_grad_hooks: bool = True
    ) -> tuple[int, int]:
        def grad_hook(grad: Any) -> None:
            self._update_and_maybe_create_winfos(grad, _MemRefType.GRAD)

        param_bytes = 0
        for param in module.parameters():
            winfos = self._update_and_maybe_create_winfos(param, _MemRefType.PARAM)
            param_bytes += sum(int(w.mem_consumed) for w in winfos)
            if param.grad is not None:
                self._update_and_maybe_create_winfos(param.grad, _MemRefType.GRAD)
            hooked = self._param_to_grad_hook_handles.get(param, None) is not None
            if install_grad_hooks and param.requires_grad and not hooked:
                self._param_to_grad_hook_handles[param] = (
                    param.register_hook(grad_hook),
                    param.register_post_accumulate_grad_hook(lambda p: grad_hook(p.grad)),
                )
        buffer_bytes = 0
        for buffer in module.buffers():
            winfos = self._update_and_maybe_create_winfos(buffer, _MemRefType.BUFFER)
            buffer_bytes += sum(int(w.mem_consumed) for w in winfos)
        return param_bytes, buffer_bytes


class ShardedTracker(_PhaseTracking, FSDPMemTracker):
    """FSDPMemTracker for FSDP2 / HSDP (and FSDP2 + TP)."""

    def __init__(self, module: Any, optimizer: Any) -> None:
        super().__init__(module, optimizer)
        self._trace_init()


def to_snapshot(raw: dict[str, int], input_bytes: int, optimizer_state_bytes: int) -> Snapshot:
    """Raw tracker categories → the trace's: ``optimizer`` split into state and step
    temporaries (state is what ``optimizer.state`` holds), ``other`` into the inputs the
    runner registered and DDP's gradient buckets."""
    out = {k: v for k, v in raw.items() if k not in ("optimizer", "other")}
    optimizer = raw.get("optimizer", 0)
    state = min(optimizer, optimizer_state_bytes)
    out["optimizer_state"] = state
    out["optimizer_temp"] = optimizer - state
    if "other" in raw:
        other = raw["other"]
        out["inputs"] = out.get("inputs", 0) + min(other, input_bytes)
        out["grad_buckets"] = other - min(other, input_bytes)
    return Snapshot({k: v for k, v in out.items() if v})
