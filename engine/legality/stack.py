"""Which strategies and methods each training stack runs, with reasons a user can act on.

Facts (the stacks' code): DeepSpeed runs its ZeRO stages only; Megatron-Core runs its
own DDP and distributed optimizer; torchtitan shards with FSDP2 (or replicates with
DDP); a plain PyTorch script calls DDP / FSDP directly; the HF Trainer runs all of
those but Megatron. peft (LoRA, QLoRA) wraps HF transformers models, which torchtitan
and Megatron-Core do not build. ``stack.name auto`` picks a stack that runs the plan,
so only an explicit stack can refuse — except that auto maps the Megatron distributed
optimizer to Megatron-Core, which runs no peft.
"""

from __future__ import annotations

from engine.errors import Problem
from engine.sections.method import MethodKind
from engine.sections.parallel import Strategy
from engine.sections.stack import StackName
from engine.stacks.catalog import PEFT_METHODS, STACKS, concrete_stack, stack_info
from engine.stacks.families import FAMILIES, family_of

_STACK = "stack.name"
_STRATEGY = "parallelism.strategy"
_KIND = "method.kind"


def _runs(strategy: Strategy) -> str:
    names = [n for n, info in STACKS.items() if family_of(strategy) in info.families]
    return ", ".join(names)


def stack_problems(name: StackName, strategy: Strategy, kind: MethodKind) -> list[Problem]:
    """Every reason this stack cannot run this strategy and method."""
    stack = concrete_stack(name, strategy, kind)
    info = stack_info(stack)
    out = []
    family = family_of(strategy)
    if family not in info.families:
        out.append(
            Problem(
                (_STACK, _STRATEGY),
                f"stack.name {stack} ({info.label}) does not run parallelism.strategy "
                f"{strategy} ({FAMILIES[family].label}); stacks that do: {_runs(strategy)}",
            )
        )
    if kind in PEFT_METHODS and not info.peft:
        why = " (auto picks it for the Megatron distributed optimizer)" if name == "auto" else ""
        out.append(
            Problem(
                (_KIND, _STACK, _STRATEGY),
                f"method.kind {kind} is built by peft on an HF transformers model, which "
                f"{info.label}{why} does not run: choose stack.name hf_trainer, pytorch or "
                f"deepspeed (with a strategy they run), or method.kind full",
            )
        )
    return out
