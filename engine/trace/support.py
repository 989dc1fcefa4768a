"""What the trace can run faithfully, decided from the plan alone (no torch needed).

The trace builds the plan's model with transformers and steps it under PyTorch's own
memory trackers on fake CPU tensors. Anything that needs a CUDA device, another
framework's engine or a kernel with no fake implementation cannot be run that way, and
a partial run would print a number that is not the plan's — so :func:`refusal` names the
first such input with one sentence, and the trace exits without a number.
"""

from __future__ import annotations

from engine.plan import Plan
from engine.stacks.defaults import resolve_stack_defaults, resolved
from engine.trace.deepspeed.support import deepspeed_refusal, uses_deepspeed
from engine.trace.megatron.support import megatron_refusal, uses_megatron

TRACEABLE_STRATEGIES: frozenset[str] = frozenset({"ddp", "fsdp2", "fsdp2_hsdp"})
MOE_FAMILIES: frozenset[str] = frozenset(
    {"mixtral", "qwen3_moe", "deepseek_v3", "qwen2_moe", "deepseek_v2", "granitemoe", "phimoe"}
)
TP_FAMILIES: frozenset[str] = frozenset({"llama", "mistral", "qwen2", "qwen3"})
"""Families whose decoder layer has separate q/k/v/o and gate/up/down projections, the
names the per-layer DTensor TP plan shards (transformers' own base_model_tp_plan)."""


def _strategy_refusal(plan: Plan) -> str | None:
    par, stack = plan.parallelism, resolve_stack_defaults(plan).stack
    if stack == "megatron_core" or par.strategy == "megatron_distopt":
        return (
            "the distributed optimizer is traced with Megatron-Core's own code: set "
            "stack.name megatron_core (docs/trace-frameworks.md)"
        )
    if par.strategy.startswith("fsdp1"):
        return (
            f"FSDP1 ({par.strategy}) is not traced: PyTorch's FSDP memory tracker covers "
            "FSDP2 (fully_shard) only; trace the plan with strategy fsdp2 or fsdp2_hsdp"
        )
    if par.strategy not in TRACEABLE_STRATEGIES:
        return f"strategy {par.strategy} is not traced"
    if par.pp > 1:
        return "pipeline parallelism (pp > 1) is not traced: one fake rank runs the whole model"
    if par.cp > 1:
        return "context parallelism (cp > 1) is not traced"
    if par.ep > 1 or par.expert_tp > 1:
        return "expert parallelism (ep / expert_tp > 1) is not traced"
    if par.sequence_parallel:
        return "sequence parallelism is not traced: the TP plan shards the decoder layers only"
    return None


def _tp_refusal(plan: Plan) -> str | None:
    par, arch = plan.parallelism, plan.model.architecture
    if par.tp == 1:
        return None
    if arch.family not in TP_FAMILIES:
        return (
            f"tensor parallelism is traced for {', '.join(sorted(TP_FAMILIES))} only, "
            f"not {arch.family}"
        )
    if par.strategy == "ddp" and par.dp > 1:
        return "DDP with tensor parallelism is not traced: DDP does not take DTensor parameters"
    if par.strategy == "fsdp2_hsdp":
        return "HSDP with tensor parallelism (a 3-D mesh) is not traced"
    if arch.kv_heads % par.tp or arch.kv_heads < par.tp:
        return (
            f"tensor parallelism needs tp ({par.tp}) to divide kv_heads ({arch.kv_heads}): "
            "the attention reshape fails on a fraction of a key/value head"
        )
    if arch.heads % par.tp or arch.intermediate % par.tp:
        return f"tp ({par.tp}) must divide heads ({arch.heads}) and intermediate"
    if plan.method.kind != "full":
        return "tensor parallelism with LoRA adapters is not traced"
    return None


def _method_refusal(plan: Plan) -> str | None:
    m = plan.method
    if m.kind == "qlora":
        return (
            "QLoRA cannot be traced on CPU: bitsandbytes' 4-bit NF4 weights and kernels are "
            "CUDA-only and have no fake-tensor implementation"
        )
    if m.kind == "custom":
        return "a custom trainable subset is not traced; use full or lora"
    if m.kind == "lora" and m.lora.implementation == "litgpt":
        return (
            "LitGPT's LoRA (method.lora.implementation litgpt) is not traced: the trace "
            "runs transformers' model with PEFT adapters, not LitGPT's GPT"
        )
    opt = m.optimizer.name
    if opt == "adam8bit" and m.optimizer.adam8bit_library == "torchao":
        return "8-bit Adam (torchao) is not traced: the tracer runs no torchao optimizer"
    if opt == "adam8bit":
        return "8-bit Adam (bitsandbytes) cannot be traced: its kernels are CUDA-only"
    if opt == "lion":
        return "Lion cannot be traced: torch.optim has no Lion implementation"
    if opt == "custom":
        return "a custom optimizer (bytes per parameter) has no implementation to trace"
    prec = m.precision
    if prec.policy == "amp_master":
        return (
            "precision amp_master (16-bit weights with a separate fp32 master copy) is "
            "DeepSpeed's / Megatron's scheme, not a PyTorch-native one; trace autocast or "
            "pure_16bit"
        )
    if prec.loss_scaling:
        return "fp16 loss scaling cannot be traced: GradScaler reads its overflow flag with .item()"
    rec = m.recompute.policy
    if rec == "offload":
        return "activation offload to the host cannot be traced (host memory is not tracked)"
    if rec == "selective" and plan.runtime.attention == "eager":
        return (
            "selective recompute with eager attention is not traced (it needs op-level "
            "checkpointing of the softmax)"
        )
    return None


def _runtime_refusal(plan: Plan) -> str | None:
    rt, arch = plan.runtime, plan.model.architecture
    if plan.offload.optimizer != "none" or plan.offload.params != "none":
        return "CPU / NVMe offload cannot be traced: host and NVMe memory are not tracked"
    if rt.attention == "flash_attn":
        return (
            "flash-attn (the flash_attn package) is a CUDA-only kernel; trace with "
            "runtime.attention = sdpa_flash, which saves the same tensors"
        )
    if rt.attention == "flex":
        return (
            "flex attention is traced on the torchtitan stack only (transformers' "
            "flex_attention path is not built); trace with runtime.attention = sdpa_flash"
        )
    if rt.attention == "sdpa_mem_efficient":
        return (
            "SDPA's memory-efficient kernel is CUDA-only; the CPU build has the flash and math "
            "paths (trace with runtime.attention = sdpa_flash)"
        )
    if rt.loss != "standard":
        return f"the {rt.loss} loss is not a transformers loss; only the standard one is traced"
    if not rt.logits_fp32_upcast:
        return "transformers' causal-LM loss always upcasts the logits to fp32"
    if arch.family == "gemma2" and rt.attention != "eager":
        return (
            "transformers' Gemma-2 refuses SDPA (attention logit soft-capping): set "
            "runtime.attention = eager to trace it"
        )
    if arch.mtp_layers:
        return "transformers' DeepSeek-V3 does not build the multi-token-prediction modules"
    if arch.family in MOE_FAMILIES and plan.method.precision.compute_dtype != "bf16":
        return (
            "MoE layers run transformers' grouped_mm expert path, whose fake kernel takes "
            "bf16 only: use compute_dtype bf16"
        )
    if (
        arch.family in MOE_FAMILIES
        and plan.method.precision.policy == "autocast"
        and (plan.parallelism.strategy == "ddp" or plan.parallelism.world_size == 1)
    ):
        return (
            "MoE under torch.autocast is not traced: CPU autocast leaves grouped_mm in fp32; "
            "use FSDP2 (MixedPrecisionPolicy) or pure_16bit"
        )
    return None


def refusal(plan: Plan) -> str | None:
    """Why this plan cannot be traced (one sentence), or None when it can (judged on the
    plan as computed: fields left to the training stack take its defaults)."""
    plan = resolved(plan)
    if uses_deepspeed(plan):
        return deepspeed_refusal(plan)  # DeepSpeed's own engine, on real CPU tensors
    if uses_megatron(plan):  # Megatron-Core's own code traces it (engine/trace/megatron)
        return megatron_refusal(plan)
    for check in (_strategy_refusal, _tp_refusal, _method_refusal, _runtime_refusal):
        reason = check(plan)
        if reason is not None:
            return reason
    return None


def adjustments(plan: Plan) -> list[str]:
    """Inputs the trace runs in an equivalent form, each said once in the result."""
    plan = resolved(plan)
    notes = []
    if plan.method.recompute.policy == "selective":
        notes.append(
            "selective recompute drops only the attention core, which SDPA's flash kernel "
            "never saves: traced as no recompute"
        )
    if plan.parallelism.dp == 1 and plan.parallelism.strategy == "ddp":
        notes.append("one data-parallel rank: traced without a DDP wrapper (no gradient buckets)")
    return notes
