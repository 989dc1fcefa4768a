"""Trace a Megatron-Core plan with Megatron-Core's own GPTModel, DDP and optimizer.

Order: the fake world of the plan's size (this process is one rank), Megatron's
process groups over it (``model.py``), then — inside ``FakeTensorMode`` and the
trace-only patches (``patches.py``) — the model, DDP and optimizer are built as
Megatron builds them, and the steps run under ``MemTracker`` (``steps.py``). The
tracker is told what Megatron allocates outside a module's parameters: the fp32 grad
buffers (``_ParamAndGradBuffer.grad_data``: gradients) and the fp32 main-parameter
shards (optimizer state, with Adam's moments). The bf16 parameters are views of the
DDP param buffer, so that buffer is what ``parameters`` measures.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.mem_tracker import _MemRefType

from engine.models.inventory import build_inventory, total_params
from engine.plan import Plan
from engine.trace.checks import checked_rank, trace_versions
from engine.trace.collect import Collector, model_states
from engine.trace.megatron.model import MegatronModel, build_megatron, init_parallel
from engine.trace.megatron.patches import megatron_patches
from engine.trace.megatron.steps import MegatronStep, run_megatron_step
from engine.trace.megatron.support import MEGATRON_VERSION, megatron_refusal
from engine.trace.patches import trace_patches
from engine.trace.progress import step_message
from engine.trace.result import TraceResult, TraceSetup
from engine.trace.shard import fake_world
from engine.trace.tracker import PlainTracker

Progress = Callable[[str], None]

NOTES = (
    "Megatron-Core's own code: GPTModel (local spec), DistributedDataParallel with fp32 "
    "main grads, its optimizer (docs/trace-frameworks.md)",
    "one model deviation: the core attention is SDPA (flash: saves the output and an "
    "fp32 log-sum-exp), as Transformer Engine's fused attention saves; the local spec's "
    "DotProductAttention would save the S×S scores",
    "Adam is torch's fused AdamW (production: TE / Apex FusedAdam, in place); weight "
    "gradients go through a bf16 wgrad before the fp32 main grad (no Apex "
    "gradient-accumulation fusion)",
)


class _States:
    """The optimizer state a step keeps: Adam's moments and step counters (inside the
    torch optimizer) and Megatron's fp32 main parameters (outside it)."""

    def __init__(self, inner: Any, mains: list[Any]) -> None:
        self.inner, self.mains = inner, mains

    @property
    def state(self) -> dict[Any, dict[str, Any]]:
        out: dict[Any, dict[str, Any]] = dict(self.inner.state)
        for index, main in enumerate(self.mains):
            entry = dict(out.get(main, {}))
            entry[f"main_{index}"] = main
            out[main] = entry
        return out


def trace_megatron(
    plan: Plan,
    steps: int,
    rank: int | None,
    progress: Progress,
    should_stop: Callable[[], bool],
) -> TraceResult:
    """Trace a (resolved) Megatron-Core plan; raises a ``TraceError`` with one reason.
    Failures inside torch / Megatron are turned into one by the caller."""
    chosen = checked_rank(plan, megatron_refusal(plan), steps, rank)
    started = time.perf_counter()
    with (
        trace_patches(plan.runtime.allocation_granularity_bytes),
        fake_world(plan.parallelism.world_size, chosen),
        megatron_patches(),
    ):
        init_parallel(plan)
        try:
            return _trace(plan, steps, chosen, progress, should_stop, started)
        finally:
            from megatron.core import parallel_state

            parallel_state.destroy_model_parallel()


def _track(built: MegatronModel, inputs: tuple[Any, ...]) -> PlainTracker:
    tracker = PlainTracker()
    tracker.track_external(built.ddp.module, built.inner, *inputs)  # DDP.buffers is a list
    for grad in built.grad_buffers:
        tracker._update_and_maybe_create_winfos(grad, _MemRefType.GRAD)
    for main in built.main_params:
        tracker._update_and_maybe_create_winfos(main, _MemRefType.OPT)
    return tracker


def _trace(
    plan: Plan,
    steps: int,
    rank: int,
    say: Progress,
    should_stop: Callable[[], bool],
    started: float,
) -> TraceResult:
    arch = plan.model.architecture
    say(f"build: Megatron-Core {MEGATRON_VERSION} GPTModel ({arch.layers} layers) on fake cpu")
    batch, seq = plan.batch.micro_batch, plan.batch.seq_len
    with FakeTensorMode(allow_non_fake_inputs=True):
        built = build_megatron(plan)
        tokens = torch.randint(0, arch.vocab, (batch, seq))
        labels = torch.randint(0, arch.vocab, (batch, seq))
        positions = torch.arange(seq).unsqueeze(0).expand(batch, seq)
        tracker = _track(built, (tokens, labels, positions))
        states = _States(built.inner, built.main_params)
        collector = Collector(tracker, states, [tokens, labels, positions])
        step = MegatronStep(
            built.ddp, built.optimizer, tokens, positions, labels, tracker, plan.batch.grad_accum
        )
        with tracker:
            for index in range(steps):
                say(step_message(index + 1, steps))
                run_megatron_step(step, index, collector, should_stop)
        from engine.trace.optim import state_tensors

        state_bytes = tracker.storage_bytes(state_tensors(states))
    result = TraceResult(
        setup=_setup(plan, rank, steps, built),
        phases=tuple(collector.records),
        model_states=model_states(collector.records, state_bytes),
        versions=trace_versions("megatron-core"),
        wall_seconds=time.perf_counter() - started,
        notes=NOTES,
        alloc_events=tuple(tracker.alloc_log.events),
    )
    say(f"done: peak {result.peak_bytes:,} B in {result.peak_phase.phase}")
    return result


def _setup(plan: Plan, rank: int, steps: int, built: MegatronModel) -> TraceSetup:
    par = plan.parallelism
    world = par.world_size
    params = list(built.ddp.parameters())
    distopt = par.strategy == "megatron_distopt"
    tp = f", TP × {par.tp}{' + SP' if par.sequence_parallel else ''}" if par.tp > 1 else ""
    opt = " + distributed optimizer" if distopt else ""
    return TraceSetup(
        family=plan.model.architecture.family,
        model_type=f"Megatron-Core {MEGATRON_VERSION} GPTModel (local spec, SDPA core attention)",
        world_size=world,
        rank=rank,
        mesh=(world // par.tp, par.tp) if par.tp > 1 else (world,),
        strategy=f"Megatron DDP × {world // par.tp}{opt}{tp}",
        tracker="MemTracker",
        steps=steps,
        micro_batches=plan.batch.grad_accum,
        attention="sdpa (flash) in the core-attention slot",
        param_dtype="bf16",
        compute_dtype="bf16",
        recompute="none",
        optimizer="adam (torch fused AdamW; fp32 main params)",
        n_params=sum(int(p.numel()) for p in params),
        n_trainable=sum(int(p.numel()) for p in params if p.requires_grad),
        plan_params=total_params(build_inventory(plan.model.architecture)),
        rounding_bytes=plan.runtime.allocation_granularity_bytes,
    )
