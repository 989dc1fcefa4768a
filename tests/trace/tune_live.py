"""A live-bytes tracker for tracing torchtune's own LoRA step on fake CPU tensors.

Why a tracker of its own and not ``engine/trace/tracker.py``: torchtune's
``OffloadActivations`` copies each saved activation to the host and brings it back in
backward, and on a CPU-only build both sides are "cpu". The tracker below tells them
apart: storages made while :attr:`LiveBytes.host` is set are host copies and are not
counted, everything else is device memory (shared/reference/tracing.md: round each
storage up to 512 B as the CUDA caching allocator does).

It keeps the running sum of every live storage (a weak reference per storage, as
torch's ``MemTracker`` does) and, at each new peak, the list of what is live with a
label (phase, module or autograd node, op) so the peak can be compared row by row
with the ledger.
"""

from __future__ import annotations

import re
import weakref
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.weak import WeakIdKeyDictionary

_BLOCK = 512
"""The CUDA caching allocator's rounding (c10/cuda/CUDACachingAllocator.cpp
kMinBlockSize)."""


def _rounded(nbytes: int) -> int:
    return (nbytes + _BLOCK - 1) // _BLOCK * _BLOCK


@dataclass
class Entry:
    """One live device storage: its rounded bytes and where it was made."""

    nbytes: int
    label: str
    shape: tuple[int, ...]
    dtype: str


class LiveBytes(TorchDispatchMode):
    """Running device bytes after every aten op, and what is live at the peak."""

    def __init__(self) -> None:
        super().__init__()
        self.phase = "init"
        self.where = ""
        self.host = False
        self.total = 0
        self.peak = 0
        self.peak_at = ""
        self.peak_live: list[Entry] = []
        self.recording = False
        self._live: dict[int, Entry] = {}
        self._seen: Any = WeakIdKeyDictionary()
        self._next = 0
        self.marks: dict[str, int] = {}
        self.mark_live: dict[str, list[Entry]] = {}
        self.phase_peaks: dict[str, int] = {}
        """The highest total under each phase and module / autograd node (the moments)."""
        self.paused: Callable[[], bool] = lambda: False

    def mark(self, phase: str) -> None:
        """Enter ``phase``, keeping what is live at its start (e.g. the loss moment)."""
        self.phase = phase
        self.marks[phase] = self.total
        self.mark_live[phase] = self._snapshot()

    def add(self, tensor: torch.Tensor, label: str) -> None:
        """Count a tensor's storage once, until it dies (or ignore it if on the host);
        a wrapper subclass (DTensor, torchao's NF4Tensor) by its inner tensors."""
        wrapper = type(tensor) is not torch.Tensor and hasattr(tensor, "__tensor_flatten__")
        if wrapper and not type(tensor).__name__.startswith("Fake"):
            for attr in tensor.__tensor_flatten__()[0]:
                inner = getattr(tensor, attr)
                if isinstance(inner, torch.Tensor):
                    self.add(inner, label)
            return
        st = tensor.untyped_storage()
        if st in self._seen or self.host:
            if self.host and st not in self._seen:
                self._seen[st] = -1
            return
        key = self._next
        self._next += 1
        entry = Entry(_rounded(st.nbytes()), label, tuple(tensor.shape), str(tensor.dtype))
        self._live[key] = entry
        self._seen[st] = key
        self.total += entry.nbytes
        weakref.finalize(st, self._drop, key)

    def resized(self, storage: Any, nbytes: int) -> None:
        """A storage resized in place (FSDP2 frees and refills its unsharded parameters
        and all-gather buffers with ``untyped_storage().resize_``, as MemTracker tracks)."""
        key = self._seen.get(storage)
        if key is None or key < 0 or key not in self._live:
            return
        entry = self._live[key]
        new = _rounded(nbytes)
        self.total += new - entry.nbytes
        entry.nbytes = new
        if self.recording and self.total > self.peak:
            self.peak = self.total
            self.peak_at = f"{self.phase}:{self.where}:resize_"
            self.peak_live = self._snapshot()

    def _drop(self, key: int) -> None:
        entry = self._live.pop(key, None)
        if entry is not None:
            self.total -= entry.nbytes

    def reset_peak(self) -> None:
        """Start a new window at what is live now (torchtune's get_memory_stats reset)."""
        self.peak = self.total
        self.peak_at = f"{self.phase}: start"
        self.peak_live = self._snapshot()

    def live_now(self) -> list[Entry]:
        return self._snapshot()

    def _snapshot(self) -> list[Entry]:
        """Copies: a resized storage's entry changes after the snapshot."""
        return [Entry(e.nbytes, e.label, e.shape, e.dtype) for e in self._live.values()]

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        out = func(*args, **(kwargs or {}))
        if self.paused():
            return out
        label = f"{self.phase}:{self.where}:{func.__name__}"
        node = torch._C._current_autograd_node()
        if node is not None:
            label = f"{self.phase}:{node.name()}:{func.__name__}"
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self.add(t, label)
        if self.recording:
            at = label.rsplit(":", 1)[0]
            if self.total > self.phase_peaks.get(at, 0):
                self.phase_peaks[at] = self.total
            if self.total > self.peak:
                self.peak = self.total
                self.peak_at = label
                self.peak_live = self._snapshot()
        return out


def by_label(entries: list[Entry], prefix_parts: int = 3) -> Counter[str]:
    """Bytes per label (the first ``prefix_parts`` ':' fields, layer and parameter
    indices folded to ``*``), largest first."""
    out: Counter[str] = Counter()
    for e in entries:
        key = ":".join(e.label.split(":")[:prefix_parts])
        out[re.sub(r"\.\d+(\.|$)", r".*\1", key)] += e.nbytes
    return out
