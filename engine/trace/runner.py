"""Trace one plan: build, lay out, materialise on fake tensors, step, collect.

The order is the one that works on a CPU-only torch (shared/reference/tracing.md):
build on ``meta`` (model, LoRA, checkpointing, TP, ``fully_shard``), then
``to_empty(device="cpu")`` inside ``FakeTensorMode(allow_non_fake_inputs=True)`` and
re-tie the head, then run the steps under the tracker. Fake ``cpu`` — not fake
``cuda`` (aborts the process on a CPU build) and not ``meta`` (SDPA would take its math
path and save the score matrix) — so SDPA picks the CPU flash kernel, whose saved set
matches CUDA FlashAttention-2.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from engine.models.inventory import build_inventory, total_params
from engine.plan import Plan
from engine.stacks.defaults import resolved
from engine.trace.build import build_meta_model, retie
from engine.trace.checks import checked_rank, trace_versions
from engine.trace.collect import Collector, model_states
from engine.trace.deepspeed.support import uses_deepspeed
from engine.trace.dtypes import casts_compute, compute_dtype, dtype_name, param_dtype
from engine.trace.errors import TraceError, TraceFailed
from engine.trace.megatron.support import uses_megatron
from engine.trace.method import apply_lora, apply_recompute
from engine.trace.optim import make_optimizer, state_tensors
from engine.trace.patches import trace_patches
from engine.trace.progress import step_message
from engine.trace.result import TraceResult, TraceSetup
from engine.trace.shard import Layout, fake_world, lay_out, wrap_ddp
from engine.trace.steps import StepContext, run_step
from engine.trace.support import adjustments, refusal
from engine.trace.titan.support import uses_titan
from engine.trace.tracker import PlainTracker, ShardedTracker

Progress = Callable[[str], None]

STEP_COUNTER_NOTE = (
    "AdamW's per-tensor step counters are counted on the device (512 B each); on CUDA "
    "the foreach and for-loop implementations keep them on the host"
)


@dataclass(frozen=True, slots=True)
class TraceOptions:
    """How to trace: steps (≥ 2; the last is reported), the rank, and a config.json to
    build from instead of the plan's own (``model.hf_config``) or its fields."""

    steps: int = 2
    rank: int | None = None
    hf_config: Mapping[str, Any] | None = None


def _batch(plan: Plan) -> tuple[Any, Any]:
    shape = (plan.batch.micro_batch, plan.batch.seq_len)
    vocab = plan.model.architecture.vocab
    return torch.randint(0, vocab, shape), torch.randint(0, vocab, shape)


def trace_plan(
    plan: Plan,
    options: TraceOptions = TraceOptions(),
    progress: Progress | None = None,
    should_stop: Callable[[], bool] = lambda: False,
) -> TraceResult:
    """Trace the plan's training step; raises a :class:`TraceError` with one reason.
    Fields left to the training stack are traced as its defaults."""
    plan = resolved(plan)
    say = progress or (lambda _msg: None)
    if uses_deepspeed(plan):  # DeepSpeed's own engine, on real CPU tensors
        from engine.trace.deepspeed.runner import trace_deepspeed

        return _one_reason(
            lambda: trace_deepspeed(plan, options.steps, options.rank, say, should_stop)
        )
    if uses_titan(plan):
        from engine.trace.titan.runner import trace_titan

        return _one_reason(lambda: trace_titan(plan, options.steps, options.rank, say, should_stop))
    if uses_megatron(plan):  # Megatron-Core's own code (engine/trace/megatron)
        from engine.trace.megatron.runner import trace_megatron

        return _one_reason(
            lambda: trace_megatron(plan, options.steps, options.rank, say, should_stop)
        )
    rank = checked_rank(plan, refusal(plan), options.steps, options.rank)
    started = time.perf_counter()
    return _one_reason(lambda: _trace_hf(plan, options, rank, say, should_stop, started))


def _trace_hf(
    plan: Plan,
    options: TraceOptions,
    rank: int,
    say: Progress,
    should_stop: Callable[[], bool],
    started: float,
) -> TraceResult:
    with (
        trace_patches(plan.runtime.allocation_granularity_bytes),
        fake_world(plan.parallelism.world_size, rank),
    ):
        return _trace(plan, options, rank, say, should_stop, started)


def _one_reason(run: Callable[[], TraceResult]) -> TraceResult:
    """Run a trace; anything torch or a framework raises becomes one line."""
    try:
        return run()
    except TraceError:
        raise
    except Exception as exc:  # torch / transformers / torchtitan: never a partial number
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise TraceFailed(f"the trace failed: {type(exc).__name__}: {first}") from exc


def _trace(
    plan: Plan,
    options: TraceOptions,
    rank: int,
    say: Progress,
    should_stop: Callable[[], bool],
    started: float,
) -> TraceResult:
    arch = plan.model.architecture
    say(f"build: {plan.model.name} ({arch.family}) on meta")
    built = build_meta_model(plan, options.hf_config)
    recompute = apply_recompute(plan, built.model)
    model = apply_lora(plan, built.model) if plan.method.kind == "lora" else built.model
    say(f"shard: world {plan.parallelism.world_size}, rank {rank}")
    layout = lay_out(plan, model, built.layers)
    with FakeTensorMode(allow_non_fake_inputs=True):
        say("materialise on fake cpu tensors")
        model.to_empty(device="cpu")
        retie(model)
        buckets: list[Any] = []
        if layout.ddp:
            model = wrap_ddp(plan, model, buckets.append)
        optimizer = make_optimizer(plan, model)
        input_ids, labels = _batch(plan)
        tracker = _tracker(layout, model, optimizer, input_ids, labels)
        collector = Collector(tracker, optimizer, [input_ids, labels])
        ctx = StepContext(
            model=model,
            optimizer=optimizer,
            input_ids=input_ids,
            labels=labels,
            tracker=tracker,
            grad_accum=plan.batch.grad_accum,
            skip_sync=plan.parallelism.knobs.accumulate_without_sync,
            autocast_dtype=(
                compute_dtype(plan) if casts_compute(plan) and not layout.sharded else None
            ),
            sharded=layout.sharded,
            ddp=layout.ddp,
            loss_parallel=layout.loss_parallel,
        )
        with tracker:
            for step in range(options.steps):
                say(step_message(step + 1, options.steps))
                run_step(ctx, step, collector, should_stop)
                for bucket in buckets:
                    tracker.mark_other(bucket)
                buckets.clear()
        state_bytes = tracker.storage_bytes(state_tensors(optimizer))
    setup = _setup(plan, built, layout, rank, options, model, recompute)
    notes = [*built.notes, *adjustments(plan)]
    if plan.method.optimizer.name == "adamw":
        notes.append(STEP_COUNTER_NOTE)
    result = TraceResult(
        setup=setup,
        phases=tuple(collector.records),
        model_states=model_states(collector.records, state_bytes),
        versions=trace_versions("transformers", "peft"),
        wall_seconds=time.perf_counter() - started,
        notes=tuple(notes),
        alloc_events=tuple(tracker.alloc_log.events),
    )
    say(f"done: peak {result.peak_bytes:,} B in {result.peak_phase.phase}")
    return result


def _tracker(layout: Layout, model: Any, optimizer: Any, input_ids: Any, labels: Any) -> Any:
    if layout.sharded:
        tracker = ShardedTracker(model, optimizer)
        tracker.track_inputs((input_ids, labels))
        return tracker
    plain = PlainTracker()
    plain.track_external(model, optimizer, input_ids, labels)
    return plain


def _setup(
    plan: Plan,
    built: Any,
    layout: Layout,
    rank: int,
    options: TraceOptions,
    model: Any,
    recompute: str,
) -> TraceSetup:
    params = list(model.parameters())
    opt = plan.method.optimizer
    return TraceSetup(
        family=plan.model.architecture.family,
        model_type=built.model_type,
        world_size=plan.parallelism.world_size,
        rank=rank,
        mesh=layout.mesh,
        strategy=layout.name,
        tracker="FSDPMemTracker" if layout.sharded else "MemTracker",
        steps=options.steps,
        micro_batches=plan.batch.grad_accum,
        attention=str(built.config._attn_implementation),
        param_dtype=dtype_name(param_dtype(plan)),
        compute_dtype=dtype_name(compute_dtype(plan)),
        recompute=recompute,
        optimizer=f"{opt.name} ({opt.implementation})",
        n_params=sum(int(p.numel()) for p in params),  # a DTensor's numel is global
        n_trainable=sum(int(p.numel()) for p in params if p.requires_grad),
        plan_params=total_params(build_inventory(plan.model.architecture)),
        rounding_bytes=plan.runtime.allocation_granularity_bytes,
    )
