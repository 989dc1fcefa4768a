"""What torchtitan 0.3.0 needs to run its step on fake CPU tensors, for the trace only.

Each is set on entry to :func:`titan_patches` and undone on exit
(shared/reference/tracing.md, "torchtitan on fake tensors"):

- **device**: torchtitan picks ``cuda`` when no accelerator is found
  (``torchtitan/tools/utils.py`` ``get_device_info``); its device mesh is built on
  ``cpu`` instead (``distributed/parallel_dims.py`` reads the name at import).
- **flex attention, uncompiled**: 0.3.0's language models run flex attention only, via
  ``torch.compile(flex_attention)`` (``models/common/attention.py`` ``FlexAttention``)
  and a compiled ``create_block_mask``; compiling on fake tensors under a tracking
  dispatch mode is refused, so the eager higher-order op runs instead
  (``_FLEX_ATTENTION_DISABLE_COMPILE_DEBUG``). Its fake rule returns what the CUDA
  kernel saves: the output plus an fp32 log-sum-exp (and max scores) per query row.
- **SPMD backend**: ``Trainer.__init__`` records ``partial_dtensor`` as the active
  backend (``distributed/utils.py`` ``set_spmd_backend``); the loss-parallel
  cross-entropy asserts it.
- **CPU backward guard**: ``flex_attention``'s ``_validate_device`` refuses inputs that
  require grad on CPU (the CPU kernel is inference-only); on fake tensors no kernel
  runs, so the guard is lifted.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import torch.nn.attention.flex_attention as flex


def _no_device_guard(query: Any, key: Any, value: Any) -> None:
    """The guard without its CPU/MPS no-backward refusal (no kernel runs on fakes)."""


@contextmanager
def _attr(owner: Any, name: str, value: Any) -> Iterator[None]:
    original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)


@contextmanager
def titan_patches() -> Iterator[None]:
    """torchtitan on fake CPU tensors, for the duration of one trace."""
    import torchtitan.distributed.parallel_dims as parallel_dims
    import torchtitan.distributed.utils as dist_utils
    import torchtitan.tools.utils as titan_utils
    from torchtitan.models.common import attention

    titan_log = logging.getLogger("torchtitan")
    level = titan_log.level
    titan_log.setLevel(logging.ERROR)
    with ExitStack() as stack:
        stack.enter_context(_attr(parallel_dims, "device_type", "cpu"))
        stack.enter_context(_attr(titan_utils, "device_type", "cpu"))
        stack.enter_context(_attr(dist_utils, "_spmd_backend", "partial_dtensor"))
        stack.enter_context(_attr(flex, "_validate_device", _no_device_guard))
        stack.enter_context(_attr(flex, "_FLEX_ATTENTION_DISABLE_COMPILE_DEBUG", True))
        stack.enter_context(
            _attr(attention.FlexAttention, "_compiled_flex_attn", staticmethod(flex.flex_attention))
        )
        stack.enter_context(_attr(attention, "_compiled_create_block_mask", flex.create_block_mask))
        try:
            yield
        finally:
            titan_log.setLevel(level)
