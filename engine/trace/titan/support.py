"""Which plans trace with torchtitan's own code, and what torchtitan cannot run.

A plan whose resolved ``stack.name`` is ``torchtitan`` is traced through torchtitan
0.3.0's model, ``parallelize_llama`` / ``parallelize_qwen3``, activation checkpointing
and losses (``runner.py``); every other stack keeps the transformers path. Decided from
the plan alone (no torch), so the CLI can refuse with one sentence before importing
anything. The AC mode names here are the ones the record carries.
"""

from __future__ import annotations

import importlib.util

from engine.ledger.activations.loss_modes import TORCHTITAN_CHUNKS
from engine.plan import Plan
from engine.stacks.defaults import resolve_stack_defaults, resolved

TITAN_VERSION = "0.3.0"
"""The torchtitan release whose code the trace runs (pyproject's ``trace`` extra)."""

TITAN_FAMILIES: dict[str, str] = {"llama": "llama3", "qwen3": "qwen3", "qwen3_moe": "qwen3"}
"""Plan family → torchtitan model package whose building blocks make the model."""

AC_MODES: dict[str, str] = {
    "none": "none",
    "full": "full (FullAC: checkpoint_wrapper per TransformerBlock)",
    "selective": "selective op (SelectiveAC: per-op save list, every second mm recomputed)",
    "every_k": "selective layer every {k} (0.2's placement: full AC on every k-th block)",
}
"""Plan recompute policy → the AC torchtitan applies, as the record names it."""


def uses_titan(plan: Plan) -> bool:
    """Whether the plan (as computed: ``auto`` resolved) runs torchtitan's code."""
    return resolve_stack_defaults(plan).stack == "torchtitan"


def ac_mode(plan: Plan) -> str:
    """The AC mode the trace applies, in words (for the record and the report)."""
    rec = resolved(plan).method.recompute
    return AC_MODES[rec.policy].format(k=rec.every_k)


def _layout_refusal(plan: Plan) -> str | None:
    par = plan.parallelism
    if par.strategy not in ("fsdp2", "ddp"):
        return f"torchtitan runs FSDP2 (or one rank); strategy {par.strategy} is not torchtitan's"
    if par.strategy == "ddp" and par.dp > 1:
        return "torchtitan's DDP (data_parallel_replicate) is not traced; use strategy fsdp2"
    arch = plan.model.architecture
    if par.tp > 1 and (arch.heads % par.tp or arch.kv_heads % par.tp or arch.intermediate % par.tp):
        return (
            f"torchtitan's TP plan splits whole heads, KV heads and FFN columns: tp ({par.tp}) "
            f"must divide {arch.heads}, {arch.kv_heads} and {arch.intermediate}"
        )
    if par.tp > 1 and arch.moe is not None:
        return "torchtitan TP with MoE layers is not traced"
    if par.pp > 1 or par.cp > 1 or par.ep > 1 or par.expert_tp > 1:
        return "torchtitan pipeline, context and expert parallelism are not traced"
    if plan.offload.optimizer != "none" or plan.offload.params != "none":
        return "torchtitan's CPU offload is not traced: host memory is not tracked"
    return None


def _model_refusal(plan: Plan) -> str | None:
    arch = plan.model.architecture
    if arch.family not in TITAN_FAMILIES:
        return (
            f"torchtitan has no {arch.family} model the trace builds "
            f"(traced: {', '.join(sorted(TITAN_FAMILIES))})"
        )
    if arch.mla is not None or arch.mtp_layers:
        return "torchtitan's DeepSeek-V3 (MLA, multi-token prediction) is not traced yet"
    moe = arch.moe
    if moe is not None and (moe.shared_experts or moe.first_dense_layers or moe.router_bias):
        return (
            "torchtitan's Qwen3 MoE has routed experts only in every layer (no shared experts, "
            "dense first layers or router bias)"
        )
    if arch.mlp != "swiglu" or arch.norm != "rmsnorm" or arch.position != "rotary":
        return "torchtitan's Llama 3 / Qwen3 blocks are SwiGLU, RMSNorm and RoPE only"
    biases = arch.qkv_bias or arch.o_bias or arch.mlp_bias or arch.lm_head_bias
    if biases or arch.norm_bias:
        return "torchtitan's Llama 3 / Qwen3 blocks have no linear or norm biases"
    if arch.family == "llama" and arch.qk_norm:
        return "torchtitan's Llama 3 has no q/k norm"
    if plan.method.kind != "full":
        return f"method {plan.method.kind} is not traced with torchtitan (full training only)"
    return None


def _step_refusal(plan: Plan) -> str | None:
    m, rt = plan.method, plan.runtime
    if m.optimizer.name != "adamw":
        return f"torchtitan's optimizer is AdamW; {m.optimizer.name} is not traced with it"
    prec = m.precision
    if prec.policy not in ("autocast", "pure_16bit") or prec.compute_dtype != "bf16":
        return (
            "torchtitan trains fp32 parameters with bf16 FSDP2 mixed precision, or pure "
            "bf16 (training.dtype bfloat16); other precisions are not torchtitan's"
        )
    if prec.loss_scaling:
        return "torchtitan has no fp16 loss scaling"
    if m.recompute.policy == "offload":
        return "torchtitan has no activation offload to the host"
    loss = _loss_refusal(plan)
    if loss is not None:
        return loss
    if rt.attention == "eager":
        return "torchtitan 0.3 runs flex attention only (sdpa and eager are gone)"
    # any other kernel traces as flex (0.3.0 models/common/config_utils.py
    # get_attention_config: flex, flex_flash, varlen); the ledger counts flex's fp32 row
    # max only where the plan says runtime.attention = flex
    return None


def _loss_refusal(plan: Plan) -> str | None:
    """The resolved ``runtime.loss_impl``: ``eager`` (plain cross-entropy) and
    ``chunked`` (``ChunkedLossWrapper``, 8 equal chunks) run; the rest cannot."""
    impl = plan.runtime.loss_impl
    if impl == "compiled":
        return (
            "torchtitan's compiled loss (compile.components loss) does not run on fake "
            "tensors under the memory tracker; set runtime.loss_impl eager or chunked"
        )
    if impl in ("fused", "vocab_parallel"):
        return (
            f"torchtitan has no {impl.replace('_', '-')} cross-entropy; "
            "set runtime.loss_impl eager or chunked"
        )
    if impl == "chunked" and plan.batch.seq_len % TORCHTITAN_CHUNKS:
        return (
            f"torchtitan's ChunkedLossWrapper splits the sequence into {TORCHTITAN_CHUNKS} "
            f"equal chunks: seq_len ({plan.batch.seq_len}) must be a multiple of it"
        )
    return None


MISSING = (
    "a torchtitan plan traces with torchtitan's own code, which is not installed: "
    "pip install 'memplan[trace]' (torchtitan==0.3.0, triton==3.9.0)"
)


def titan_refusal(plan: Plan) -> str | None:
    """Why torchtitan's code cannot run this plan (one sentence), or None."""
    plan = resolved(plan)
    for check in (_layout_refusal, _model_refusal, _step_refusal):
        reason = check(plan)
        if reason is not None:
            return reason
    if importlib.util.find_spec("torchtitan") is None:
        return MISSING
    return None
