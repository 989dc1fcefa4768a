"""Which plans trace with Megatron-Core's own code, and what the trace cannot run.

A plan whose resolved ``stack.name`` is ``megatron_core`` is traced through
Megatron-Core 0.16.1's ``GPTModel`` (the ``local`` layer spec with one substituted core
attention, ``attention.py``), its ``DistributedDataParallel`` grad buffers and its
distributed optimizer (``runner.py``). Decided from the plan alone (no torch), so the
CLI can refuse with one sentence before importing anything.
"""

from __future__ import annotations

import importlib.util

from engine.plan import Plan
from engine.stacks.defaults import resolve_stack_defaults, resolved

MEGATRON_VERSION = "0.16.1"
"""The megatron-core release whose code the trace runs (pyproject's ``trace`` extra)."""

STRATEGIES = ("megatron_distopt", "ddp")
"""Plan strategies the trace builds: the distributed optimizer, or Megatron DDP alone."""


def uses_megatron(plan: Plan) -> bool:
    """Whether the plan (as computed: ``auto`` resolved) runs Megatron-Core's code."""
    return resolve_stack_defaults(plan).stack == "megatron_core"


def _layout_refusal(plan: Plan) -> str | None:
    par = plan.parallelism
    if par.strategy not in STRATEGIES:
        return (
            f"the Megatron-Core trace builds {' or '.join(STRATEGIES)}; "
            f"strategy {par.strategy} is not traced with it"
        )
    if par.pp > 1 or par.cp > 1 or par.ep > 1 or par.expert_tp > 1:
        return "Megatron-Core pipeline, context and expert parallelism are not traced yet"
    arch = plan.model.architecture
    if par.tp > 1 and (arch.heads % par.tp or arch.kv_heads % par.tp or arch.intermediate % par.tp):
        return (
            f"Megatron-Core's TP splits whole heads, KV heads and FFN columns: tp ({par.tp}) "
            f"must divide {arch.heads}, {arch.kv_heads} and {arch.intermediate}"
        )
    if plan.offload.optimizer != "none" or plan.offload.params != "none":
        return "Megatron-Core's CPU offload is not traced: host memory is not tracked"
    return None


def _model_refusal(plan: Plan) -> str | None:
    arch = plan.model.architecture
    if arch.moe is not None or arch.mla is not None or arch.mtp_layers:
        return (
            "Megatron-Core MoE, MLA and multi-token prediction are not traced yet (dense GPT only)"
        )
    if arch.mlp != "swiglu" or arch.norm != "rmsnorm" or arch.position != "rotary":
        return "the Megatron-Core trace builds SwiGLU, RMSNorm, RoPE GPT models only"
    if arch.qkv_bias or arch.o_bias or arch.mlp_bias or arch.lm_head_bias or arch.norm_bias:
        return "the Megatron-Core trace builds bias-free linears and norms only"
    if arch.qk_norm or arch.sandwich_norm:
        return "the Megatron-Core trace has no q/k or sandwich norms yet"
    if plan.method.kind != "full":
        return f"method {plan.method.kind} is not traced with Megatron-Core (full training only)"
    return None


def _step_refusal(plan: Plan) -> str | None:
    m = plan.method
    if m.optimizer.name != "adamw":
        return f"the Megatron-Core trace runs Adam(W); {m.optimizer.name} is not traced with it"
    if m.precision.compute_dtype != "bf16" or m.precision.loss_scaling:
        return "the Megatron-Core trace runs bf16 with fp32 main grads (no fp16 loss scaling)"
    if m.recompute.policy == "selective":
        return (
            "Megatron-Core's selective recompute checkpoints the core attention, the one "
            "module the trace substitutes (SDPA for TE's fused attention): not traced"
        )
    if m.recompute.policy not in ("none", "full"):
        return f"Megatron-Core recompute {m.recompute.policy} is not traced yet (none and full are)"
    return None


MISSING = (
    "a Megatron-Core plan traces with Megatron-Core's own code, which is not installed: "
    "pip install 'memplan[trace]' (megatron-core==0.16.1)"
)


def megatron_refusal(plan: Plan) -> str | None:
    """Why Megatron-Core's code cannot run this plan in a trace (one sentence), or None."""
    plan = resolved(plan)
    for check in (_layout_refusal, _model_refusal, _step_refusal):
        reason = check(plan)
        if reason is not None:
            return reason
    # the parent first: find_spec of a submodule imports its parent, and raises without it
    if (
        importlib.util.find_spec("megatron") is None
        or importlib.util.find_spec("megatron.core") is None
    ):
        return MISSING
    return None
