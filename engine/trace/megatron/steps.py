"""One Megatron-Core training step under the tracker, phase by phase.

``megatron/training/training.py`` ``train_step`` in the trace's phases: ``zero_grad``
(every model chunk's ``zero_grad_buffer()`` — the fp32 grad buffer is zeroed in place
and stays allocated — then ``optimizer.zero_grad()``); per micro-batch a ``forward``
(``GPTModel`` with labels returns the per-token fp32 loss from its vocab-parallel
cross-entropy; ``loss_func`` sums it, as ``pretrain_gpt.py`` does) and a ``backward``
(``pipeline_parallel/schedules.py`` ``forward_backward_no_pipelining``: every
micro-batch but the last under ``no_sync``, then
``distributed/finalize_model_grads.py`` ``finalize_model_grads``: ``finish_grad_sync`` —
the buckets' reduce-scatter (distributed optimizer) or all-reduce in the grad buffer —
and the sequence-parallel norm weights' all-reduce over TP); then ``optimizer``
(``optimizer.step()``: grad norm, clip, the Adam step on the fp32 main shards, the
copy back into the bf16 params and their all-gather).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.trace.steps import PhaseSink, TraceCancelled, tracked_phase


@dataclass
class MegatronStep:
    """What one step needs, built by the runner."""

    ddp: Any
    optimizer: Any
    tokens: Any
    positions: Any
    labels: Any
    tracker: Any
    grad_accum: int


def run_megatron_step(
    s: MegatronStep, step: int, sink: PhaseSink, should_stop: Callable[[], bool]
) -> None:
    """One optimizer step; every phase's mark goes to ``sink``."""
    tracker = s.tracker
    with tracked_phase(tracker, f"{step}/zero_grad"):
        s.ddp.zero_grad_buffer()
        s.optimizer.zero_grad()
    sink(step, 0, "zero_grad", tracker.end_phase())
    for micro in range(s.grad_accum):
        last = micro == s.grad_accum - 1
        sync = contextlib.nullcontext() if last else s.ddp.no_sync()
        with sync:
            tracker.reset_mod_stats()
            with tracked_phase(tracker, f"{step}/forward"):
                # DDP.forward only calls its module (no overlapped param gather here);
                # called directly, as MemTracker cannot hook DDP (its ``buffers`` is a list)
                losses = s.ddp.module(s.tokens, s.positions, None, labels=s.labels)
                loss = losses.float().sum()
                del losses
            sink(step, micro, "forward", tracker.end_phase())
            if should_stop():
                raise TraceCancelled("trace cancelled")
            with tracked_phase(tracker, f"{step}/backward"):
                loss.backward()
                del loss
                if last:
                    from megatron.core.distributed import finalize_model_grads

                    finalize_model_grads([s.ddp])
            sink(step, micro, "backward", tracker.end_phase())
    with tracked_phase(tracker, f"{step}/optimizer"):
        s.optimizer.step()
    sink(step, 0, "optimizer", tracker.end_phase())
    if should_stop():
        raise TraceCancelled("trace cancelled")
