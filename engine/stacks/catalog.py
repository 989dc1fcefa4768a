"""The training stacks: which strategies and methods each runs, and which stack ``auto``
means for a plan.

A stack is the code that runs the job (a plain PyTorch script, HF Trainer / accelerate,
torchtitan, DeepSpeed, Megatron-Core). The strategy says what is sharded; the stack says
how the framework around it allocates — the defaults it implies live in
:mod:`engine.stacks.defaults`, every hard rule about which combinations run in
:mod:`engine.legality.stack`.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.sections.method import MethodKind
from engine.sections.parallel import Strategy
from engine.sections.stack import ConcreteStack, StackName
from engine.stacks.families import Family, family_of


@dataclass(frozen=True, slots=True)
class StackInfo:
    """One training stack: its name in prose, the strategy families it runs, whether it
    runs peft models (LoRA / QLoRA), and the source key naming its code."""

    label: str
    families: frozenset[Family]
    peft: bool
    source: str


STACKS: dict[ConcreteStack, StackInfo] = {
    "pytorch": StackInfo(
        "plain PyTorch script", frozenset({"ddp", "fsdp1", "fsdp2"}), True, "stack-pytorch"
    ),
    "hf_trainer": StackInfo(
        "HF Trainer / accelerate",
        frozenset({"ddp", "fsdp1", "fsdp2", "deepspeed"}),
        True,
        "stack-hf-trainer",
    ),
    "torchtitan": StackInfo("torchtitan", frozenset({"ddp", "fsdp2"}), False, "stack-torchtitan"),
    "deepspeed": StackInfo("DeepSpeed", frozenset({"deepspeed"}), True, "stack-deepspeed"),
    "megatron_core": StackInfo(
        "Megatron-Core", frozenset({"ddp", "megatron"}), False, "stack-megatron-core"
    ),
}

PEFT_METHODS: frozenset[MethodKind] = frozenset({"lora", "qlora"})
"""Methods that peft builds (adapters over a frozen, possibly 4-bit, HF model)."""


def stack_info(stack: ConcreteStack) -> StackInfo:
    return STACKS[stack]


def concrete_stack(name: StackName, strategy: Strategy, kind: MethodKind) -> ConcreteStack:
    """The stack a plan runs on: the named one, or for ``auto`` the one its strategy and
    method imply — ZeRO is DeepSpeed, the distributed optimizer is Megatron-Core, LoRA and
    QLoRA are peft on the HF Trainer, and the rest a plain PyTorch script (the stack the
    measured cases ran)."""
    if name != "auto":
        return name
    family = family_of(strategy)
    if family == "megatron":
        return "megatron_core"
    if kind in PEFT_METHODS:
        return "hf_trainer"
    if family == "deepspeed":
        return "deepspeed"
    return "pytorch"
