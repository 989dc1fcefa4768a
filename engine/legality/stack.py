"""What each training stack runs, with reasons a user can act on: which strategies and
methods (:func:`stack_problems`), and which parallel dimensions (:func:`dimension_problems`).

Strategies and methods (the stacks' code): DeepSpeed runs its ZeRO stages only;
Megatron-Core runs its own DDP and distributed optimizer; torchtitan shards with FSDP2 (or
replicates with DDP); a plain PyTorch script calls DDP / FSDP directly; the HF Trainer runs
all of those but Megatron. peft (LoRA, QLoRA) wraps HF transformers models, which
torchtitan and Megatron-Core do not build. ``stack.name auto`` picks a stack that runs the
plan, so only an explicit stack can refuse — except that auto maps the Megatron
distributed optimizer to Megatron-Core, which runs no peft.

Parallel dimensions, by stack first, then by the strategy's family
(:data:`engine.stacks.families.STRATEGIES`):

- Megatron-Core runs TP, PP, CP and EP with its DDP and its distributed optimizer
  (``megatron/core/parallel_state.py``).
- The HF Trainer runs no pipeline schedule and no expert parallelism; its context
  parallelism is accelerate's ``ParallelismConfig(cp_size=…)``, which needs FSDP2.
- torchtitan's DDP refuses any second dimension (``parallelize_llama``: "DDP has not
  supported > 1D parallelism").
- FSDP2 (torchtitan, a plain script): TP (DTensor), PP (``torch.distributed.pipelining``),
  CP (``context_parallel``) and EP all compose with ``fully_shard``
  (``torchtitan/distributed/parallel_dims.py``).
- FSDP1 composes with DTensor TP over a device mesh, but not with pipelining, context
  parallelism or expert parallelism (``FullyShardedDataParallel`` takes a 2-D mesh for
  HSDP / TP only).
- DDP (a plain script) has no context or expert parallelism; TP runs through DTensor,
  PP through ``torch.distributed.pipelining``.
- DeepSpeed ZeRO: AutoTP training combines TP with ZeRO stages 0–2 only (DeepSpeed
  "Automatic Tensor Parallelism (Training)"), the pipeline engine with ZeRO-1 only
  (``deepspeed/runtime/pipe/engine.py`` asserts ZeRO stage < 2), DeepSpeed-MoE's expert
  parallelism with ZeRO-1/2, and its sequence parallelism is Ulysses (all-to-all over
  heads), not the ring/all-gather context parallelism MemPlan models.

Every dimension rule depends on one parallel dimension (and the plan's stack, strategy
and method, which a layout search never changes), so the lattice judges it once per value.
"""

from __future__ import annotations

from engine.errors import Problem
from engine.sections.method import MethodKind
from engine.sections.parallel import Strategy
from engine.sections.stack import ConcreteStack, StackName
from engine.stacks.catalog import PEFT_METHODS, STACKS, concrete_stack, stack_info
from engine.stacks.families import FAMILIES, family_of, rule_of

_STACK = "stack.name"
_STRATEGY = "parallelism.strategy"
_KIND = "method.kind"

_NAMES = {
    "tp": "tensor parallelism",
    "pp": "pipeline parallelism",
    "cp": "context parallelism",
    "ep": "expert parallelism",
}


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


def _stack_why_not(stack: ConcreteStack, strategy: Strategy, dim: str) -> str | None:
    """What the stack itself refuses, whatever the strategy's family allows."""
    family = family_of(strategy)
    if stack == "hf_trainer":
        if dim == "pp":
            return "the HF Trainer runs no pipeline schedule"
        if dim == "ep":
            return "the HF Trainer has no expert parallelism"
        if dim == "cp" and family != "fsdp2":
            return (
                "the HF Trainer's context parallelism (accelerate ParallelismConfig "
                "cp_size) runs with FSDP2 only"
            )
    if stack == "torchtitan" and family == "ddp":
        return "torchtitan's DDP runs no second parallel dimension (use FSDP2)"
    return None


def _family_why_not(strategy: Strategy, dim: str) -> str | None:
    """What the strategy's family cannot run, on a stack that runs the family natively."""
    family, stage = family_of(strategy), rule_of(strategy).zero_stage
    label = rule_of(strategy).label
    if family in ("megatron", "fsdp2"):
        return None
    if family == "fsdp1":
        if dim == "tp":
            return None
        return f"{label} has no {_NAMES[dim]} (FSDP2 or Megatron have)"
    if family == "ddp":
        if dim in ("tp", "pp"):
            return None
        return f"DDP has no {_NAMES[dim]} outside Megatron-Core"
    # DeepSpeed ZeRO
    if dim == "tp" and stage >= 3:
        return "DeepSpeed's AutoTP training combines TP with ZeRO stages 0–2 only"
    if dim == "pp" and stage >= 2:
        return "DeepSpeed's pipeline engine runs with ZeRO-1 only"
    if dim == "ep" and stage >= 3:
        return "DeepSpeed-MoE's expert parallelism runs with ZeRO-1/2 only"
    if dim == "cp":
        return (
            "DeepSpeed's sequence parallelism is Ulysses (all-to-all over heads), not the "
            "ring or all-gather context parallelism counted here"
        )
    return None


def dimension_why_not(stack: ConcreteStack, strategy: Strategy, dim: str) -> str | None:
    """Why ``stack`` running ``strategy`` cannot run ``dim`` > 1, or None when it can."""
    if stack == "megatron_core":
        return None
    return _stack_why_not(stack, strategy, dim) or _family_why_not(strategy, dim)


def dimension_problems(
    stack: ConcreteStack, strategy: Strategy, dim: str, size: int
) -> list[Problem]:
    """The reason ``stack`` with ``strategy`` cannot run ``dim`` of ``size`` (empty when
    it can)."""
    if size <= 1:
        return []
    why = dimension_why_not(stack, strategy, dim)
    if why is None:
        return []
    return [
        Problem(
            (f"parallelism.{dim}", _STRATEGY, _STACK),
            f"parallelism.{dim} ({size}) cannot run: {why}",
        )
    ]


def adapter_tp_words(stack: ConcreteStack, kind: str, tp: int) -> tuple[str, ...]:
    """Why the layout search proposes no TP for LoRA / QLoRA on the HF Trainer.

    transformers' tensor parallelism (``from_pretrained(tp_plan="auto")``, the
    "Tensor parallelism" guide of the transformers docs) shards the model's own
    ``nn.Linear`` weights as DTensors; peft's adapters wrap those layers afterwards and
    bitsandbytes' 4-bit ``Params4bit`` is not a DTensor, and neither peft's nor
    transformers' docs give a recipe that trains adapters over a ``tp_plan``. A plan may
    still set it (it is the user's to try); the search only proposes what is documented.
    """
    if stack != "hf_trainer" or kind not in ("lora", "qlora") or tp <= 1:
        return ()
    base = "a 4-bit bitsandbytes base" if kind == "qlora" else "peft adapters"
    return (
        f"TP {tp} with {base} on the HF Trainer is not a documented recipe "
        f"(transformers tp_plan shards full weights; peft documents no TP training)",
    )
