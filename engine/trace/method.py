"""The plan's training method on the meta model: LoRA adapters and recomputation.

LoRA targets are the modules of the tensors the ledger adapts: every 2-D weight of the
plan's inventory whose role is in ``method.lora.targets`` (``engine/ledger/states/
lora.py``), named as transformers names them (the inventory's names are checkpoint
names, e.g. ``model.layers.0.self_attn.q_proj.weight`` → module ``…q_proj``). So q/k/v/o
map to ``q_proj`` … on Llama, ``qkv_proj`` on Phi-3, ``c_attn`` / ``attn.c_proj`` on
GPT-2, ``query_key_value`` / ``dense`` on GPT-NeoX, per family, without a second table.

Recomputation follows transformers' own activation checkpointing (the path an HF user
takes): non-reentrant ``torch.utils.checkpoint`` around each decoder layer (``full``),
or every k-th layer (``every_k``, transformers' ``every_n_layers``).
"""

from __future__ import annotations

from typing import Any

from engine.ledger.states.lora import is_target
from engine.models.inventory import build_inventory
from engine.plan import Plan
from engine.trace.dtypes import torch_dtype
from engine.trace.errors import TraceRefused


def lora_module_names(plan: Plan) -> list[str]:
    """The module names PEFT should wrap, from the plan's inventory."""
    lora = plan.method.lora
    return [
        t.name.removesuffix(".weight")
        for t in build_inventory(plan.model.architecture)
        if is_target(t, lora)
    ]


def apply_lora(plan: Plan, model: Any) -> Any:
    """Wrap the targets with PEFT LoRA adapters (kept fp32 over a 16-bit base unless the
    plan says otherwise, as PEFT's ``autocast_adapter_dtype`` does)."""
    from peft import LoraConfig, get_peft_model

    lora = plan.method.lora
    names = lora_module_names(plan)
    if not names:
        raise TraceRefused(f"method.lora.targets {list(lora.targets)} match no module")
    config = LoraConfig(
        r=lora.rank,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=names,
        bias="none",
    )
    fp32_adapters = lora.adapter_dtype == "fp32"
    try:
        peft_model = get_peft_model(model, config, autocast_adapter_dtype=fp32_adapters)
    except ValueError as exc:
        raise TraceRefused(f"PEFT cannot place the LoRA adapters: {exc}") from exc
    if not fp32_adapters:
        adapter_dtype = torch_dtype(lora.adapter_dtype)
        for name, param in peft_model.named_parameters():
            if "lora_" in name:
                param.data = param.data.to(adapter_dtype)
    return peft_model


def apply_recompute(plan: Plan, model: Any) -> str:
    """Turn on the plan's activation checkpointing; returns what was applied."""
    rec = plan.method.recompute
    if rec.policy in ("none", "selective"):
        return "none"
    every = rec.every_k if rec.policy == "every_k" else 1
    model.activation_checkpointing_enable(
        activation_checkpointing_kwargs={"use_reentrant": False}, every_n_layers=every
    )
    if every == 1:
        return "full (non-reentrant, every decoder layer)"
    return f"every {every} layers (non-reentrant)"
