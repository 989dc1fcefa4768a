"""The Stack section: how the job is run, whose code decides every default.

Memory follows the framework's code, not the algorithm's name: DeepSpeed with
``bf16.enabled`` casts the module to bf16 and keeps an fp32 master in its optimizer,
FSDP's MixedPrecisionPolicy keeps fp32 parameters and casts per unit, the HF Trainer
steps with fused AdamW, peft turns on gradient checkpointing for QLoRA. Every field left
at ``auto`` takes the chosen stack's default (:mod:`engine.stacks.defaults`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from engine.sections.base import Section

StackName = Literal["auto", "pytorch", "hf_trainer", "torchtitan", "deepspeed", "megatron_core"]
ConcreteStack = Literal["pytorch", "hf_trainer", "torchtitan", "deepspeed", "megatron_core"]


class StackSection(Section):
    """The training stack (framework and launcher) that runs the plan."""

    name: StackName = Field(
        default="auto",
        description="pytorch: a plain PyTorch script (DDP / FSDP1 / FSDP2 called directly); "
        "hf_trainer: HF Trainer / accelerate (DDP, FSDP1, FSDP2 or DeepSpeed), with peft for "
        "LoRA / QLoRA; torchtitan; deepspeed: deepspeed.initialize with its ds_config; "
        "megatron_core: Megatron-Core (pretrain_gpt). auto = from the strategy and method: "
        "ZeRO → deepspeed, Megatron → megatron_core, LoRA / QLoRA → hf_trainer, else pytorch.",
    )
