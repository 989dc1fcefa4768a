"""Trace a torchtitan plan with torchtitan's own model, parallelisation, AC and loss.

The order is the transformers path's (``engine/trace/runner.py``): build on ``meta``
(``model.py``: torchtitan's blocks, AC, FSDP2), ``to_empty(device="cpu")`` inside
``FakeTensorMode`` — skipping ``init_weights``, whose ``trunc_normal_`` is
data-dependent on fake tensors; ``to_empty`` gives every parameter and RoPE cache its
shape — then the steps under ``FSDPMemTracker``. The attention ``BlockMask`` is built
once, before tracking, as ``Trainer.post_dataloading_process`` builds it per batch
(``get_attention_masks``: causal, one document per row).

One step is torchtitan's ``Trainer.train_step``: ``zero_grad`` first — as the plan's
``runtime.zero_grad`` says: ``zero_fill`` is 0.3's ``set_to_none=False`` (the last step's
gradients stay live through this forward), ``set_to_none`` the Dec-2024 code's plain
``zero_grad()`` — then per micro-batch a
forward + loss (the chunked loss runs its per-chunk backward here) and a backward, then
``clip_grad_norm_(foreach=True)`` and the optimizer step. The optimizer is what its
``OptimizersContainer`` builds by default: ``torch.optim.AdamW`` with
``implementation = "fused"`` (one fp32 ``step`` per parameter tensor).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from engine.ledger.activations.loss_modes import TORCHTITAN_CHUNKS
from engine.models.inventory import build_inventory, total_params
from engine.plan import Plan
from engine.trace.checks import checked_rank, trace_versions
from engine.trace.collect import Collector, model_states
from engine.trace.optim import LEARNING_RATE, state_tensors
from engine.trace.patches import trace_patches
from engine.trace.progress import step_message
from engine.trace.result import TraceResult, TraceSetup
from engine.trace.shard import fake_world
from engine.trace.titan.loss import build_loss, nest_head
from engine.trace.titan.model import TitanModel, build_titan_model
from engine.trace.titan.patches import titan_patches
from engine.trace.titan.steps import TitanStep, run_titan_step
from engine.trace.titan.support import TITAN_VERSION, ac_mode, titan_refusal
from engine.trace.tracker import ShardedTracker

Progress = Callable[[str], None]

NOTES = (
    "torchtitan's own code: its model blocks, parallelize function, AC and loss "
    "(flex attention run uncompiled: its fake rule saves the output and an fp32 "
    "log-sum-exp per query row)",
    "init_weights is skipped (data-dependent on fake tensors); values never change allocations",
)


class TitanTracker(ShardedTracker):
    """FSDPMemTracker that also sees higher-order ops (flex attention's HOP)."""

    supports_higher_order_operators = True


def trace_titan(
    plan: Plan,
    steps: int,
    rank: int | None,
    progress: Progress,
    should_stop: Callable[[], bool],
) -> TraceResult:
    """Trace a (resolved) torchtitan plan; raises a ``TraceError`` with one reason.
    Failures inside torch / torchtitan are turned into one by the caller."""
    chosen = checked_rank(plan, titan_refusal(plan), steps, rank)
    started = time.perf_counter()
    with (
        trace_patches(plan.runtime.allocation_granularity_bytes),
        titan_patches(),
        fake_world(plan.parallelism.world_size, chosen),
    ):
        return _trace(plan, steps, chosen, progress, should_stop, started)


def _trace(
    plan: Plan,
    steps: int,
    rank: int,
    say: Progress,
    should_stop: Callable[[], bool],
    started: float,
) -> TraceResult:
    say(f"build: torchtitan {plan.model.architecture.family} on meta, AC {ac_mode(plan)}")
    built = build_titan_model(plan)
    model = built.model
    batch, seq = plan.batch.micro_batch, plan.batch.seq_len
    positions = torch.arange(seq).unsqueeze(0).expand(batch, seq)
    masks = model.get_attention_masks(positions)
    loss_fn = build_loss(plan.runtime.loss_impl, model)
    with FakeTensorMode(allow_non_fake_inputs=True):
        say("materialise on fake cpu tensors (init_weights skipped)")
        model.to_empty(device="cpu")
        model.train()
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=LEARNING_RATE, fused=True)
        vocab = plan.model.architecture.vocab
        tokens = torch.randint(0, vocab, (batch, seq))
        labels = torch.randint(0, vocab, (batch, seq))
        valid = torch.tensor(batch * seq * plan.parallelism.dp, dtype=torch.int64)
        tracker = TitanTracker(model, optimizer)
        tracker.track_inputs((tokens, labels))
        if plan.runtime.loss_impl == "chunked":
            nest_head(tracker, model.lm_head)
        collector = Collector(tracker, optimizer, [tokens, labels])
        step = TitanStep(
            model, loss_fn, optimizer, params, tokens, labels, valid, masks,
            tracker, plan.batch.grad_accum, plan.runtime.zero_grad == "set_to_none",
        )  # fmt: skip
        with tracker:
            for index in range(steps):
                say(step_message(index + 1, steps))
                run_titan_step(step, index, collector, should_stop)
        state_bytes = tracker.storage_bytes(state_tensors(optimizer))
    result = TraceResult(
        setup=_setup(plan, built, rank, steps, model),
        phases=tuple(collector.records),
        model_states=model_states(collector.records, state_bytes),
        versions=trace_versions("torchtitan"),
        wall_seconds=time.perf_counter() - started,
        notes=NOTES,
        alloc_events=tuple(tracker.alloc_log.events),
    )
    say(f"done: peak {result.peak_bytes:,} B in {result.peak_phase.phase}")
    return result


def _setup(plan: Plan, built: TitanModel, rank: int, steps: int, model: Any) -> TraceSetup:
    par = plan.parallelism
    world = par.world_size
    params = list(model.parameters())
    tp = f", TP × {par.tp}{' + SP' if par.sequence_parallel else ''}" if par.tp > 1 else ""
    pure = plan.method.precision.policy == "pure_16bit"
    loss: str = "standard" if plan.runtime.loss_impl == "eager" else "chunked"
    if loss == "chunked":
        loss = f"chunked × {TORCHTITAN_CHUNKS}"
    return TraceSetup(
        family=plan.model.architecture.family,
        model_type=f"torchtitan {TITAN_VERSION} {built.model_name} ({loss} loss)",
        world_size=world,
        rank=rank,
        mesh=(world // par.tp, par.tp) if par.tp > 1 else (world,),
        strategy=f"torchtitan FSDP2 × {world // par.tp}{tp}",
        tracker="FSDPMemTracker",
        steps=steps,
        micro_batches=plan.batch.grad_accum,
        attention="flex (eager HOP)",
        param_dtype="bf16" if pure else "fp32",
        compute_dtype="bf16",
        recompute=ac_mode(plan),
        optimizer="adamw (fused)",
        n_params=sum(int(p.numel()) for p in params),  # a DTensor's numel is global
        n_trainable=sum(int(p.numel()) for p in params if p.requires_grad),
        plan_params=total_params(build_inventory(plan.model.architecture)),
        rounding_bytes=plan.runtime.allocation_granularity_bytes,
    )
