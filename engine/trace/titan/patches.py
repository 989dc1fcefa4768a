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
- **RMSNorm as CUDA runs it**: ``nn.RMSNorm`` calls ``torch.rms_norm``, which on a
  CUDA input runs the fused kernel ``aten._fused_rms_norm`` (saves the input and an
  fp32 ``rstd`` per row; ``aten/src/ATen/native/layer_norm.cpp`` ``rms_norm_symint``)
  but on CPU the composite decomposition, whose autograd keeps an fp32 upcast of the
  input and the fp32 normalised tensor (+24,576 B per token per 4096-wide norm).
  :class:`FusedRMSNorm` allocates what the CUDA kernel allocates instead: forward the
  output (input's dtype) and rstd (fp32, one per row), saved input / rstd / weight;
  backward the input's and the weight's gradients. A DTensor input (TP + SP: the norms
  run on sequence shards) takes it too: on CUDA its ``is_cuda`` sends it to the fused
  kernel, for which DTensor has sharding rules (``distributed/tensor/_ops/_math_ops.py``
  ``_fused_rms_norm``); on CPU the composite ran (+24,576 B a token a norm kept).
- **fp32 autocast as CUDA runs it**: the MoE router computes its gate under
  ``torch.autocast(device_type=x.device.type, dtype=torch.float32)``
  (``models/common/moe.py`` ``TokenChoiceTopKRouter.forward``); on CUDA that casts the
  mm's bf16 input and weight to fp32 (both kept for its backward: T·h·4 + E·h·4) and
  makes the scores fp32, but CPU autocast supports only 16-bit dtypes and disables
  itself, so the gate ran in bf16. :func:`_autocast` makes a CPU fp32 autocast cast
  ``F.linear``'s floating inputs to fp32, as CUDA's does; every other autocast is torch's.
- **CPU backward guard**: ``flex_attention``'s ``_validate_device`` refuses inputs that
  require grad on CPU (the CPU kernel is inference-only); on fake tensors no kernel
  runs, so the guard is lifted.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import torch
import torch.nn.attention.flex_attention as flex
import torch.nn.functional as functional


class FusedRMSNorm(torch.autograd.Function):  # type: ignore[misc]
    """``aten._fused_rms_norm`` / ``_fused_rms_norm_backward``'s allocations (module
    docstring); values are never read on fake tensors."""

    @staticmethod
    def forward(ctx: Any, x: Any, dims: int, weight: Any, eps: float | None) -> Any:
        rstd = x.new_empty((*x.shape[: x.dim() - dims], *([1] * dims)), dtype=torch.float32)
        ctx.save_for_backward(x, rstd, weight)
        return torch.empty_like(x)

    @staticmethod
    def backward(ctx: Any, grad: Any) -> Any:
        x, _rstd, weight = ctx.saved_tensors
        grad_w = torch.empty_like(weight) if weight is not None else None
        return torch.empty_like(x), None, grad_w, None


_TORCH_RMS_NORM = functional.rms_norm


def _rms_norm(x: Any, normalized_shape: Any, weight: Any = None, eps: float | None = None) -> Any:
    if not x.is_floating_point():
        return _TORCH_RMS_NORM(x, normalized_shape, weight, eps)
    return FusedRMSNorm.apply(x, len(normalized_shape), weight, eps)


class _Fp32Linear(torch.overrides.TorchFunctionMode):  # type: ignore[misc]
    """``F.linear`` with its floating inputs cast to fp32 (CUDA fp32 autocast's rule)."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func is functional.linear:
            args = tuple(
                a.float() if torch.is_tensor(a) and a.is_floating_point() else a for a in args
            )
        return func(*args, **(kwargs or {}))


_TORCH_AUTOCAST = torch.autocast


def _autocast(device_type: str, dtype: Any = None, *args: Any, **kwargs: Any) -> Any:
    """``torch.autocast``, but a CPU fp32 one runs as CUDA's (module docstring)."""
    if device_type == "cpu" and dtype is torch.float32:
        return _Fp32Linear()
    return _TORCH_AUTOCAST(device_type, dtype, *args, **kwargs)


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
        stack.enter_context(_attr(functional, "rms_norm", _rms_norm))
        stack.enter_context(_attr(torch, "autocast", _autocast))
        stack.enter_context(_attr(flex, "_FLEX_ATTENTION_DISABLE_COMPILE_DEBUG", True))
        stack.enter_context(
            _attr(attention.FlexAttention, "_compiled_flex_attn", staticmethod(flex.flex_attention))
        )
        stack.enter_context(_attr(attention, "_compiled_create_block_mask", flex.create_block_mask))
        try:
            yield
        finally:
            titan_log.setLevel(level)
