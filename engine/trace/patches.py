"""The pitfall fixes of ``shared/reference/tracing.md`` that need patching, for the trace only.

Each patch is applied on entry to :func:`trace_patches` and undone on exit, so nothing
outside a trace sees them:

- **512-B rounding** (the CUDA caching allocator's minimum block): MemTracker rounds
  only storages on a ``cuda`` device; the trace runs on fake ``cpu`` tensors, so every
  storage is rounded here.
- **DTensor sharding propagation** runs ops on global-shape fake tensors inside the
  trace's own fake mode; FSDPMemTracker only skips propagation under a *different* fake
  mode, so those phantom tensors were counted (pitfall 2). :func:`propagating` tells the
  tracker to let them pass untracked.
- **Packed-sequence detection**: transformers treats fake tensors as "tracing" and
  cannot rule out packed sequences, so it builds a dense (B, 1, S, S) mask and switches
  off SDPA's causal and GQA paths (pitfall 1). For an unpacked batch — the plan's — the
  detection returns None on a GPU; it is forced to here.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import transformers.masking_utils as masking
from torch.distributed._tools import mem_tracker
from torch.distributed.tensor._sharding_prop import ShardingPropagator
from transformers.utils import logging as hf_logging

_depth = [0]


def propagating() -> bool:
    """Whether DTensor's sharding propagation is running (its ops are not allocations)."""
    return _depth[0] > 0


def _counting(original: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _depth[0] += 1
        try:
            return original(*args, **kwargs)
        finally:
            _depth[0] -= 1

    return wrapper


def _no_packed_sequences(position_ids: Any) -> None:
    """An unpacked batch: one sequence per row (what the GPU path returns)."""
    return None


@contextmanager
def trace_patches(rounding_bytes: int) -> Iterator[None]:
    """Apply the three patches for the duration of a trace; library warnings (about
    fake tensors, deprecated aliases, config defaults) are silenced meanwhile, since the
    trace reports its own notes."""
    info = mem_tracker._WeakRefInfo
    original_size = info._calculate_mem_consumed
    original_prop = ShardingPropagator._propagate_tensor_meta_non_cached
    original_packed = masking.find_packed_sequence_indices

    def rounded(self: Any) -> int:
        raw = int(self.size) * int(self.element_size)
        return math.ceil(raw / rounding_bytes) * rounding_bytes

    info._calculate_mem_consumed = rounded
    ShardingPropagator._propagate_tensor_meta_non_cached = _counting(original_prop)
    masking.find_packed_sequence_indices = _no_packed_sequences
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    fake_log = logging.getLogger("torch._subclasses.fake_tensor")  # logs a failing op
    fake_level = fake_log.level
    fake_log.setLevel(logging.CRITICAL)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        hf_logging.set_verbosity(verbosity)
        fake_log.setLevel(fake_level)
        info._calculate_mem_consumed = original_size
        ShardingPropagator._propagate_tensor_meta_non_cached = original_prop
        masking.find_packed_sequence_indices = original_packed
        _depth[0] = 0
