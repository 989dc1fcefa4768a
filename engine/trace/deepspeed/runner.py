"""Trace a ``deepspeed`` plan with DeepSpeed's own engine on real CPU tensors.

DeepSpeed cannot run on fake tensors (``docs/trace-frameworks.md``), so the plan's model
is materialised for real — only plans small enough are accepted (``support.py``) — and
stepped by ``deepspeed.initialize`` / ``engine(…)`` / ``engine.backward`` /
``engine.step`` with a fake process group of the plan's world (its collectives return at
once; the shapes and buffers are the real ones of rank r of N). The model is transformers'
(what a DeepSpeed user trains), built as the HF path builds it (``engine/trace/build.py``)
in bf16; the client optimizer is ``torch.optim.AdamW(fused=True)`` (DeepSpeed's FusedAdam
is a CUDA kernel), accepted with ``zero_allow_untested_optimizer``.

The tracker is entered *before* ``deepspeed.initialize``, so every buffer the engine
makes is seen being made; DeepSpeed's own buffers are then re-tagged into the trace's
categories (``tracker.py``). One step is forward, ``engine.backward``, ``engine.step``
(which zeroes the gradients itself) and an explicit ``engine.zero_grad()``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from engine.models.inventory import build_inventory, total_params
from engine.plan import Plan
from engine.trace.build import ATTENTION, MetaModel, hf_config
from engine.trace.checks import checked_rank, trace_versions
from engine.trace.collect import Collector, model_states
from engine.trace.deepspeed.config import ds_config
from engine.trace.deepspeed.environment import deepspeed_environment
from engine.trace.deepspeed.support import STAGES, deepspeed_refusal
from engine.trace.deepspeed.tracker import DeepSpeedTracker, retag_after_calls
from engine.trace.optim import LEARNING_RATE
from engine.trace.patches import trace_patches
from engine.trace.progress import step_message
from engine.trace.result import TraceResult, TraceSetup
from engine.trace.shard import fake_world
from engine.trace.steps import TraceCancelled, tracked_phase

Progress = Callable[[str], None]

INIT_STD = 0.02
"""transformers' ``initializer_range``: finite weights; values never change allocations."""

NOTES = (
    "DeepSpeed's own engine on real CPU tensors (DS_ACCELERATOR=cpu) with a fake process "
    "group: collectives return at once, shapes and buffers are rank r of N's",
    "client optimizer torch.optim.AdamW(fused=True) (DeepSpeed's FusedAdam is CUDA-only): "
    "one fp32 step tensor per flat partition, FusedAdam keeps it as a Python int",
    "the fp32 master partition is counted as optimizer state (the ledger's "
    "hbm.master_weights is in its optimizer group)",
)


@dataclass
class _States:
    """The optimizer as the collector sees it: the inner optimizer's state plus the fp32
    master partition, so both count as optimizer state."""

    state: dict[Any, dict[str, Any]]


def trace_deepspeed(
    plan: Plan,
    steps: int,
    rank: int | None,
    progress: Progress,
    should_stop: Callable[[], bool],
) -> TraceResult:
    """Trace a (resolved) deepspeed plan; raises a ``TraceError`` with one reason.
    Failures inside torch / DeepSpeed are turned into one by the caller."""
    chosen = checked_rank(plan, deepspeed_refusal(plan), steps, rank)
    started = time.perf_counter()
    world = plan.parallelism.world_size
    with (
        trace_patches(plan.runtime.allocation_granularity_bytes),
        deepspeed_environment(world, chosen),
        fake_world(world, chosen),
    ):
        return _trace(plan, steps, chosen, progress, should_stop, started)


def _build(plan: Plan) -> MetaModel:
    """The plan's causal LM on the CPU in bf16 (what ``bf16.enabled`` trains), built by
    transformers with its own initialisation: real buffers (RoPE's ``inv_freq``) and
    finite weights — ``to_empty`` from meta would leave both uninitialised, and a NaN
    loss makes DeepSpeed skip every step."""
    from transformers import AutoModelForCausalLM

    model_type, config = hf_config(plan)
    config.initializer_range = INIT_STD
    model = AutoModelForCausalLM.from_config(
        config, dtype=torch.bfloat16, attn_implementation=ATTENTION[plan.runtime.attention]
    )
    model.train()
    return MetaModel(model, config, model_type)


def _by_name(tensors: list[Any]) -> dict[str, Any]:
    return {str(i): t for i, t in enumerate(tensors)}


def _master(zero: Any) -> list[Any]:
    for name in ("single_partition_of_fp32_groups", "fp32_partitioned_groups_flat"):
        value = getattr(zero, name, None)
        if value:
            return list(value)
    return []


def _trace(
    plan: Plan,
    steps: int,
    rank: int,
    say: Progress,
    should_stop: Callable[[], bool],
    started: float,
) -> TraceResult:
    import deepspeed

    stage = STAGES[plan.parallelism.strategy]
    say(f"build: {plan.model.name} with transformers, real cpu tensors (bf16)")
    built = _build(plan)
    model = built.model
    vocab = plan.model.architecture.vocab
    shape = (plan.batch.micro_batch, plan.batch.seq_len)
    tokens, labels = torch.randint(0, vocab, shape), torch.randint(0, vocab, shape)
    client = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, fused=True)
    tracker = DeepSpeedTracker()
    tracker.track_external(model, tokens, labels)
    with tracker, retag_after_calls(tracker):
        say(f"deepspeed.initialize: ZeRO-{stage}, world {plan.parallelism.world_size}")
        engine, zero, _, _ = deepspeed.initialize(
            model=model, optimizer=client, config=ds_config(plan)
        )
        del client
        tracker.zero, tracker.module = zero, engine.module
        tracker.retag()
        inner = zero.optimizer
        states = _States({**inner.state, "master": _by_name(_master(zero))})
        collector = Collector(tracker, states, [tokens, labels])
        for index in range(steps):
            say(step_message(index + 1, steps))
            _step(engine, tracker, collector, index, tokens, labels)
            if should_stop():
                raise TraceCancelled("trace cancelled")
            states.state = {**inner.state, "master": _by_name(_master(zero))}
        state_bytes = tracker.storage_bytes([t for s in states.state.values() for t in s.values()])
    result = TraceResult(
        setup=_setup(plan, built, rank, steps, engine.module, stage),
        phases=tuple(collector.records),
        model_states=model_states(collector.records, state_bytes),
        versions=trace_versions("deepspeed", "transformers"),
        wall_seconds=time.perf_counter() - started,
        notes=(*NOTES, *built.notes),
        alloc_events=tuple(tracker.alloc_log.events),
    )
    say(f"done: peak {result.peak_bytes:,} B in {result.peak_phase.phase}")
    return result


def _step(
    engine: Any, tracker: DeepSpeedTracker, sink: Collector, index: int, tokens: Any, labels: Any
) -> None:
    """One step: forward, ``engine.backward``, ``engine.step``, ``engine.zero_grad``."""
    tracker.reset_mod_stats()
    with tracked_phase(tracker, f"{index}/forward"):
        loss = engine(input_ids=tokens, labels=labels).loss
    sink(index, 0, "forward", tracker.end_phase())
    with tracked_phase(tracker, f"{index}/backward"):
        engine.backward(loss)
        del loss
        tracker.retag()
    sink(index, 0, "backward", tracker.end_phase())
    with tracked_phase(tracker, f"{index}/optimizer"), tracker.engine_step():
        engine.step()
    sink(index, 0, "optimizer", tracker.end_phase())
    with tracked_phase(tracker, f"{index}/zero_grad"):
        engine.zero_grad()
    sink(index, 0, "zero_grad", tracker.end_phase())


def _setup(plan: Plan, built: Any, rank: int, steps: int, module: Any, stage: int) -> TraceSetup:
    params = list(module.parameters())
    numel = [int(getattr(p, "ds_numel", p.numel())) for p in params]
    world = plan.parallelism.world_size
    return TraceSetup(
        family=plan.model.architecture.family,
        model_type=f"{built.model_type} (transformers) under DeepSpeed ZeRO-{stage}",
        world_size=world,
        rank=rank,
        mesh=(world,),
        strategy=f"DeepSpeed ZeRO-{stage} × {world}",
        tracker="MemTracker on real cpu tensors",
        steps=steps,
        micro_batches=plan.batch.grad_accum,
        attention=str(built.config._attn_implementation),
        param_dtype="bf16",
        compute_dtype="bf16",
        recompute="none",
        optimizer="adamw (torch fused, DeepSpeed ZeRO wrapper)",
        n_params=sum(numel),
        n_trainable=sum(n for n, p in zip(numel, params, strict=True) if p.requires_grad),
        plan_params=total_params(build_inventory(plan.model.architecture)),
        rounding_bytes=plan.runtime.allocation_granularity_bytes,
    )
