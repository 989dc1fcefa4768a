"""Stand-ins that let torchtune's CUDA-only pieces run on a fake CPU step.

``OffloadActivations`` (torchtune/training/_activation_offloading.py at 1814feb) needs CUDA
streams, pinned host buffers and ``.to("cuda")``. On one CPU "device" the stand-ins keep
its bookkeeping exactly (the ``fwd_stash``, ``bwd_tensor_stash`` and their deletions run
as written) and change only what memory a call makes:

- ``torch.empty_like(..., pin_memory=True, device="cpu")``: the host copy, not counted
  (made with :attr:`LiveBytes.host` set);
- ``tensor.to("cuda", ...)`` in the unpack hook: a fresh device copy of the host tensor
  (``clone``), as the H2D copy allocates a new device block (:func:`device_copies_in`);
- ``record_stream``: nothing (one stream);
- ``torch.cuda.default_stream`` / ``Stream`` / ``stream``: inert objects whose events are
  always complete (on one stream every wait is already satisfied).

:class:`CompiledChunkCE` stands for ``compile_loss``'s compiled ``compute_cross_entropy``
(torchtune/training/_compile.py): inductor fuses ``logits.float()``, log-softmax and the
gather, so the AOT graph keeps the bf16 chunk (plus an fp32 row logsumexp) for backward
and the backward writes one bf16 gradient of the chunk; no fp32 copy of a chunk exists.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from tests.trace.tune_live import LiveBytes


class _Event:
    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        return None


class _Stream:
    def wait_event(self, event: _Event) -> None:
        return None

    def wait_stream(self, stream: _Stream) -> None:
        return None

    def record_event(self) -> _Event:
        return _Event()


@contextlib.contextmanager
def offload_stand_ins(live: LiveBytes) -> Iterator[None]:
    """CUDA stream stand-ins and the host / device copies, for the block.

    Patched on ``torch`` itself, not through a function mode: the offloading's unpack hook
    runs inside the autograd engine, where a Python function mode is not active.
    """
    saved_cuda = {k: getattr(torch.cuda, k) for k in ("default_stream", "Stream", "stream")}
    empty_like, record_stream = torch.empty_like, torch.Tensor.record_stream
    stream = _Stream()

    def host_empty_like(*args: Any, **kwargs: Any) -> torch.Tensor:
        if "pin_memory" not in kwargs:
            return empty_like(*args, **kwargs)
        kwargs.pop("pin_memory")
        kwargs.pop("device", None)
        live.host = True
        try:
            return empty_like(*args, **kwargs)
        finally:
            live.host = False

    torch.cuda.default_stream = lambda *a, **k: stream  # type: ignore[assignment]
    torch.cuda.Stream = lambda *a, **k: _Stream()  # type: ignore[assignment,misc]
    torch.cuda.stream = lambda *a, **k: contextlib.nullcontext()  # type: ignore[assignment]
    torch.empty_like = host_empty_like  # type: ignore[assignment]
    torch.Tensor.record_stream = lambda *a, **k: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        for k, v in saved_cuda.items():
            setattr(torch.cuda, k, v)
        torch.empty_like = empty_like  # type: ignore[assignment]
        torch.Tensor.record_stream = record_stream  # type: ignore[method-assign]


def device_copies_in(ctx: Any) -> Any:
    """Make ``ctx``'s unpack hook bring host copies back as fresh device tensors.

    ``tensor.to("cuda")`` becomes ``clone()`` only while the hook runs (a global patch
    of ``Tensor.to`` would recurse through torchao's NF4Tensor ``__torch_function__``).
    """
    unpack, to = ctx.unpack_hook, torch.Tensor.to

    def device_to(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        wanted = [a for a in args if isinstance(a, str | torch.device)] + [kwargs.get("device")]
        if "cuda" in [str(a) for a in wanted if a is not None]:
            return self.clone()
        return to(self, *args, **kwargs)

    def hook(packed: Any) -> Any:
        torch.Tensor.to = device_to  # type: ignore[method-assign,assignment]
        try:
            return unpack(packed)
        finally:
            torch.Tensor.to = to  # type: ignore[method-assign]

    ctx.unpack_hook = hook
    return ctx


class CompiledChunkCE(torch.autograd.Function):
    """The saved set and outputs of compiled ``compute_cross_entropy`` on one chunk.

    Values do not matter on fake tensors; shapes and dtypes do: the forward keeps the bf16
    chunk and an fp32 logsumexp per row, returns an fp32 scalar; the backward returns a
    bf16 gradient shaped like the chunk.
    """

    @staticmethod
    def forward(ctx: Any, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        lse = torch.empty(logits.shape[0], dtype=torch.float32)
        ctx.save_for_backward(logits, lse, labels)
        return torch.zeros((), dtype=torch.float32)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        logits, _lse, _labels = ctx.saved_tensors
        return torch.empty_like(logits), None

    @staticmethod
    def compute(logits: torch.Tensor, labels: torch.Tensor, normalize: bool = True) -> Any:
        return CompiledChunkCE.apply(logits, labels)
