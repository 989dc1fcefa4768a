"""One torchtitan training step under the tracker, phase by phase.

``Trainer.train_step`` (torchtitan 0.3.0 ``trainer.py``) in the trace's phases:
``zero_grad`` (``set_to_none=False`` in 0.3: the gradients are zeroed in place and stay
live; ``set_to_none=True`` where the plan's ``runtime.zero_grad`` says so),
then per micro-batch ``forward`` (model, then loss — the chunked loss runs its per-chunk
backward here) and ``backward``, then ``optimizer`` (``dist_utils.clip_grad_norm_`` with
``foreach=True``, then the step). Gradient sync is on for every micro-batch: torchtitan
does not skip it under accumulation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.trace.steps import PhaseSink, TraceCancelled, tracked_phase

MAX_NORM = 1.0
"""torchtitan's ``training.max_norm`` default (any value allocates the same)."""


@dataclass
class TitanStep:
    """What one step needs, built by the runner."""

    model: Any
    loss_fn: Any
    optimizer: Any
    params: list[Any]
    tokens: Any
    labels: Any
    valid_tokens: Any
    masks: Any
    tracker: Any
    grad_accum: int
    set_to_none: bool = False


def _clip(params: list[Any]) -> None:
    from torchtitan.distributed import utils as dist_utils

    dist_utils.clip_grad_norm_(params, MAX_NORM, foreach=True, pp_mesh=None, ep_enabled=False)


def run_titan_step(
    s: TitanStep, step: int, sink: PhaseSink, should_stop: Callable[[], bool]
) -> None:
    """One optimizer step; every phase's mark goes to ``sink``."""
    tracker = s.tracker
    with tracked_phase(tracker, f"{step}/zero_grad"):
        s.optimizer.zero_grad(set_to_none=s.set_to_none)
    sink(step, 0, "zero_grad", tracker.end_phase())
    for micro in range(s.grad_accum):
        tracker.reset_mod_stats()
        with tracked_phase(tracker, f"{step}/forward"):
            pred = s.model(s.tokens, attention_masks=s.masks)
            loss, _metrics = s.loss_fn(pred, s.labels, s.valid_tokens)
            del pred
        sink(step, micro, "forward", tracker.end_phase())
        if should_stop():
            raise TraceCancelled("trace cancelled")
        with tracked_phase(tracker, f"{step}/backward"):
            loss.backward()
            del loss
        sink(step, micro, "backward", tracker.end_phase())
    with tracked_phase(tracker, f"{step}/optimizer"):
        _clip(s.params)
        s.optimizer.step()
    sink(step, 0, "optimizer", tracker.end_phase())
    if should_stop():
        raise TraceCancelled("trace cancelled")
