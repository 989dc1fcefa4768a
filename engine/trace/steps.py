"""Run training steps under the tracker, one phase at a time.

A step is: per micro-batch a forward with labels (transformers' causal-LM loss) and a
backward, then ``optimizer.step()`` and ``zero_grad(set_to_none=True)``. The garbage
collector is off inside a phase and run between phases, so a reference cycle cannot
hold a tensor by accident. Under gradient accumulation with
``accumulate_without_sync`` the gradient sync is skipped on all but the last
micro-batch (FSDP2 ``set_requires_gradient_sync``, DDP ``no_sync``).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from engine.trace.errors import TraceError
from engine.trace.tracker import PhaseMark


class TraceCancelled(TraceError):
    """The caller asked the trace to stop (between phases)."""


@dataclass
class StepContext:
    """What the step loop needs, built by the runner."""

    model: Any
    optimizer: Any
    input_ids: Any
    labels: Any
    tracker: Any
    grad_accum: int
    skip_sync: bool  # accumulate without gradient sync until the last micro-batch
    autocast_dtype: Any | None  # torch.autocast when unsharded mixed precision
    sharded: bool
    ddp: bool
    loss_parallel: bool = False


PhaseSink = Callable[[int, int, str, PhaseMark], None]
"""Receives (step, micro-batch, phase, mark) as each phase ends."""


@contextlib.contextmanager
def tracked_phase(tracker: Any, label: str) -> Iterator[None]:
    """One phase: gc off inside, collected after; allocations are logged under
    ``label`` (``"<step>/<phase>"``)."""
    gc.disable()
    tracker.alloc_log.phase = label
    tracker.begin_phase()
    try:
        yield
    finally:
        gc.enable()
    gc.collect()


@contextlib.contextmanager
def _micro_batch(ctx: StepContext, sync: bool) -> Iterator[None]:
    """Gradient sync on or off for this micro-batch; the loss-parallel cross-entropy
    (forward and backward) when TP shards the logits over the vocabulary."""
    if ctx.sharded:
        ctx.model.set_requires_gradient_sync(sync)
    with contextlib.ExitStack() as stack:
        if ctx.ddp and not sync:
            stack.enter_context(ctx.model.no_sync())
        if ctx.loss_parallel:
            from torch.distributed.tensor.parallel import loss_parallel

            stack.enter_context(loss_parallel())
        yield


def _forward(ctx: StepContext) -> Any:
    if ctx.autocast_dtype is None:
        return ctx.model(input_ids=ctx.input_ids, labels=ctx.labels).loss
    with torch.autocast("cpu", dtype=ctx.autocast_dtype):
        return ctx.model(input_ids=ctx.input_ids, labels=ctx.labels).loss


def run_step(ctx: StepContext, step: int, sink: PhaseSink, should_stop: Callable[[], bool]) -> None:
    """One optimizer step; every phase's mark goes to ``sink``."""
    tracker = ctx.tracker
    for micro in range(ctx.grad_accum):
        sync = micro == ctx.grad_accum - 1 or not ctx.skip_sync
        with _micro_batch(ctx, sync):
            tracker.reset_mod_stats()
            with tracked_phase(tracker, f"{step}/forward"):
                loss = _forward(ctx)
                if ctx.grad_accum > 1:
                    loss = loss / ctx.grad_accum
            sink(step, micro, "forward", tracker.end_phase())
            if should_stop():
                raise TraceCancelled("trace cancelled")
            with tracked_phase(tracker, f"{step}/backward"):
                loss.backward()
                del loss
            sink(step, micro, "backward", tracker.end_phase())
    with tracked_phase(tracker, f"{step}/optimizer"):
        ctx.optimizer.step()
    sink(step, 0, "optimizer", tracker.end_phase())
    with tracked_phase(tracker, f"{step}/zero_grad"):
        ctx.optimizer.zero_grad(set_to_none=True)
    sink(step, 0, "zero_grad", tracker.end_phase())
    if should_stop():
        raise TraceCancelled("trace cancelled")
