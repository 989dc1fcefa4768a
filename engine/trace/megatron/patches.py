"""What Megatron-Core 0.16.1 needs to run its step on fake CPU tensors, for the trace only.

Each is set on entry to :func:`megatron_patches` and undone on exit; none changes what a
tensor's bytes are — only where it is placed or how a value nobody reads is produced
(paths inside the installed ``megatron/core``):

- **the trace's device for CUDA placements** (:class:`TraceDevice`): Megatron places
  its buffers on CUDA by name — ``distributed/param_and_grad_buffer.py``
  ``_ParamAndGradBuffer.__init__`` (``device=torch.cuda.current_device()`` for the
  contiguous param / grad buffers), ``optimizer/optimizer.py``
  ``MixedPrecisionOptimizer.__init__`` (``torch.tensor([1.0], device='cuda')``: the
  found-inf / scale scalars), ``optimizer/clip_grads.py`` ``get_grad_norm_fp32``
  (``torch.zeros(1, device='cuda')``), ``utils.py`` ``GlobalMemoryBuffer.get_tensor``.
  ``torch.cuda.current_device`` answers the trace's device (a CPU build raises) and
  every factory call asking for a CUDA device gets the trace's fake ``cpu`` instead:
  same shape, same dtype, so the same bytes. ``Tensor.type()`` reports ``torch.cuda.*`` so the
  distributed optimizer's dtype check (``distrib_optimizer.py``
  ``_build_model_and_main_param_groups``) accepts the parameters; ``.cuda()`` is a no-op.
- **scalar reads**: a fake tensor has no value; ``.item()`` answers 0 — the grad norm
  (``clip_grads.py`` ``get_grad_norm_fp32``: no clipping, which on a GPU scales the
  gradients in place) and found-inf (fp16 only) are the only values the step reads.
- **param-group agreement**: ``optimizer/__init__.py`` ``_get_param_groups``
  all-gathers each rank's param-group keys with ``all_gather_object`` (pickling needs
  real data); every rank of a trace is the same program, so each slot gets this rank's.
- **the DP gloo groups → the fake group**: ``initialize_model_parallel`` and
  ``get_megatron_optimizer`` are called with ``create_gloo_process_groups=False`` /
  ``use_gloo_process_groups=False`` (``runner.py``): gloo needs a real store, and the
  gloo groups only serve checkpoint save / load, never the step.
- **coalesced collectives**: ``param_and_grad_buffer.py`` wraps each bucket's
  reduce-scatter / all-gather in ``torch.distributed._coalescing_manager``, whose
  coalesced op has no fake kernel; each collective runs alone instead, writing into the
  same buffer views (no allocation of its own either way).
- **the grad-norm kernel**: without Apex / Transformer Engine, ``clip_grads.py`` uses
  ``utils.local_multi_tensor_l2_norm``, which builds a tensor from Python floats
  (data-dependent); :func:`_l2_norm` returns the one fp32 norm Apex's
  ``multi_tensor_l2norm`` returns, from per-tensor norms (4 B each, transient).
- **the optimizer kernel**: without Apex / TE, ``get_megatron_optimizer`` builds
  ``torch.optim.AdamW`` (single-tensor loop on CPU: one temporary the size of each
  parameter shard); production runs TE / Apex ``FusedAdam``, which updates in place.
  AdamW is built ``fused=True`` while the optimizer is made (:func:`fused_adamw`).
- **Megatron's fused SwiGLU, uncompiled**: with ``bias_activation_fusion`` (Megatron-LM's
  default ``--bias-swiglu-fusion``) the MLP runs ``fusions/fused_bias_swiglu.py``
  ``SwiGLUFunction``, which saves only its input (the fc1 output); its ``swiglu`` /
  ``swiglu_back`` are wrapped in ``torch.compile`` (``jit.py`` ``jit_fuser``), which is
  refused under a tracking dispatch mode on fake tensors, so their eager originals run.
- **the CUDA RNG tracker**: ``tensor_parallel/random.py`` ``CudaRNGStatesTracker.fork``
  swaps in a per-TP-rank CUDA generator state around dropout (the sequence-parallel
  embedding dropout runs inside it); the states are registered by
  ``model_parallel_cuda_manual_seed``, which a CPU build cannot run. The fork allocates
  nothing (dropout is 0 here), so it runs as a plain context.
- **the CUDA RNG state around recompute**: ``tensor_parallel/random.py``
  ``CheckpointFunction`` (full recompute) saves and restores the CUDA generator state
  (``_get_cuda_rng_state`` / ``_set_cuda_rng_state``) so a recomputed dropout draws the
  same mask; the state is a host tensor, never device memory, and a CPU build has no CUDA
  generator: an empty state is saved and restoring it does nothing.
- **the local norm under sequence parallelism**: ``transformer/torch_norm.py``
  ``WrappedTorchNorm.__new__`` asserts ``not config.sequence_parallel`` (Apex's and TE's
  norms take it); :func:`_wrapped_norm` builds the same ``torch.nn.RMSNorm`` and marks its
  weight ``sequence_parallel`` as TE's ``TENorm`` does, so its gradient is all-reduced over
  TP (``distributed/finalize_model_grads.py``). A norm's bytes do not depend on it.
- **RMSNorm as CUDA runs it**: ``torch.nn.RMSNorm`` (the local spec's ``WrappedTorchNorm``)
  on CPU keeps an fp32 upcast of its input; the CUDA fused kernel (and TE's RMSNorm)
  saves the input and an fp32 ``rstd`` per row — ``titan/patches.py``'s ``FusedRMSNorm``.
"""

from __future__ import annotations

import functools
import logging
import warnings
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import torch
import torch.nn.functional as functional
from torch.overrides import TorchFunctionMode

from engine.trace.titan.patches import FusedRMSNorm

TRACE_DEVICE = "cpu"
"""Where the trace's fake tensors live (shared/reference/tracing.md: fake cpu)."""


def _is_cuda(device: Any) -> bool:
    return isinstance(device, int) or "cuda" in str(device)


class TraceDevice(TorchFunctionMode):  # type: ignore[misc]
    """CUDA placements → the trace's device; ``type()`` / ``.cuda()`` / ``.item()`` as
    the module docstring says."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = dict(kwargs or {})
        if _is_cuda(kwargs.get("device")):
            kwargs["device"] = TRACE_DEVICE
        if func is torch.Tensor.type and len(args) == 1 and not kwargs:
            name = str(func(*args))
            return name if ".cuda." in name else name.replace("torch.", "torch.cuda.", 1)
        if func is torch.Tensor.cuda:
            return args[0]
        if func is torch.Tensor.item:
            return 0.0 if args[0].is_floating_point() else 0
        return func(*args, **kwargs)


def _current_device() -> str:
    """The trace's device: also where the mode is not active (a custom autograd
    Function's backward, e.g. ``tensor_parallel/layers.py``'s sequence-parallel
    reduce-scatter buffer)."""
    return TRACE_DEVICE


def _all_gather_object(out: list[Any], obj: Any, group: Any = None) -> None:
    for index in range(len(out)):
        out[index] = obj


class _Done:
    """The handle a synchronous coalesced collective returns."""

    def wait(self) -> None:
        return None


@contextmanager
def _one_by_one(group: Any = None, device: Any = None, async_ops: bool = False) -> Iterator[_Done]:
    yield _Done()


def _l2_norm(chunk: int, noop: Any, tensor_lists: Any, per_tensor: bool, *args: Any) -> Any:
    norms = torch._foreach_norm(tensor_lists[0], 2.0)
    return torch.linalg.vector_norm(torch.stack(list(norms))).reshape(1), None


def _rms_norm(x: Any, normalized_shape: Any, weight: Any = None, eps: float | None = None) -> Any:
    if not x.is_floating_point():
        return _TORCH_RMS_NORM(x, normalized_shape, weight, eps)
    return FusedRMSNorm.apply(x, len(normalized_shape), weight, eps)


_TORCH_RMS_NORM = functional.rms_norm


def _no_cuda_rng_state(*args: Any, **kwargs: Any) -> Any:
    return torch.empty(0, dtype=torch.uint8)


def _keep_cuda_rng_state(*args: Any, **kwargs: Any) -> None:
    return None


@contextmanager
def _no_fork(self: Any, name: str = "model-parallel-rng") -> Iterator[None]:
    yield


def _wrapped_norm(
    cls: Any,
    config: Any,
    hidden_size: int,
    eps: float = 1e-5,
    persist_layer_norm: bool = False,
    zero_centered_gamma: bool = False,
    normalization: str = "LayerNorm",
) -> Any:
    """``WrappedTorchNorm.__new__`` for RMSNorm, sequence parallelism allowed."""
    norm = torch.nn.RMSNorm(normalized_shape=hidden_size, eps=eps)
    norm.weight.sequence_parallel = bool(config.sequence_parallel)
    return norm


@contextmanager
def _attr(owner: Any, name: str, value: Any) -> Iterator[None]:
    original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)


@contextmanager
def fused_adamw() -> Iterator[None]:
    """``torch.optim.AdamW`` built ``fused=True`` while Megatron makes its optimizer."""
    with _attr(torch.optim, "AdamW", functools.partial(torch.optim.AdamW, fused=True)):
        yield


@contextmanager
def megatron_patches() -> Iterator[None]:
    """Megatron-Core on fake CPU tensors, for the duration of one trace."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Apex / TE not installed" fallbacks at import
        import megatron.core.distributed.param_and_grad_buffer as buffers
        import megatron.core.fusions.fused_bias_swiglu as swiglu
        import megatron.core.optimizer.clip_grads as clip_grads
        import megatron.core.tensor_parallel.random as tp_random
        from megatron.core.tensor_parallel.random import CudaRNGStatesTracker
        from megatron.core.transformer.torch_norm import WrappedTorchNorm
    mlog = logging.getLogger("megatron")
    level = mlog.level
    mlog.setLevel(logging.ERROR)
    with ExitStack() as stack:
        stack.enter_context(_attr(torch.cuda, "current_device", _current_device))
        stack.enter_context(_attr(torch.distributed, "all_gather_object", _all_gather_object))
        stack.enter_context(_attr(buffers, "_coalescing_manager", _one_by_one))
        stack.enter_context(_attr(clip_grads, "l2_norm_impl", _l2_norm))
        stack.enter_context(_attr(functional, "rms_norm", _rms_norm))
        stack.enter_context(_attr(WrappedTorchNorm, "__new__", staticmethod(_wrapped_norm)))
        stack.enter_context(_attr(CudaRNGStatesTracker, "fork", _no_fork))
        stack.enter_context(_attr(tp_random, "_get_cuda_rng_state", _no_cuda_rng_state))
        stack.enter_context(_attr(tp_random, "_set_cuda_rng_state", _keep_cuda_rng_state))
        for name in ("swiglu", "swiglu_back"):
            compiled = getattr(swiglu, name)
            eager = getattr(compiled, "_torchdynamo_orig_callable", compiled)
            stack.enter_context(_attr(swiglu, name, eager))
        stack.enter_context(TraceDevice())
        try:
            yield
        finally:
            mlog.setLevel(level)
