"""Which parallel dimensions each training stack can run, with reasons a user can act on.

A layout MemPlan can count is not always one the framework can launch. Facts, by the
strategy's family (:data:`engine.stacks.families.STRATEGIES`):

- Megatron-Core runs TP, PP, CP and EP (``megatron/core/parallel_state.py``).
- FSDP2 stands for torchtitan's stack: TP (DTensor), PP (``torch.distributed.pipelining``),
  CP (``context_parallel``) and EP all compose with ``fully_shard``
  (``torchtitan/distributed/parallel_dims.py``).
- FSDP1 composes with DTensor TP over a device mesh, but not with pipelining, context
  parallelism or expert parallelism (``torch/distributed/fsdp/fully_sharded_data_parallel.py``
  takes a 2-D mesh for HSDP / TP only).
- DDP (Hugging Face Trainer, accelerate) has no context or expert parallelism; TP runs
  through transformers' ``tp_plan`` with DTensor, PP through ``torch.distributed.pipelining``.
- DeepSpeed ZeRO: AutoTP training combines TP with ZeRO stages 0–2 only (DeepSpeed
  "Automatic Tensor Parallelism (Training)"), the pipeline engine with ZeRO-1 only
  (``deepspeed/runtime/pipe/engine.py`` asserts ZeRO stage < 2), DeepSpeed-MoE's expert
  parallelism with ZeRO-1/2, and its sequence parallelism is Ulysses (all-to-all over
  heads), not the ring/all-gather context parallelism MemPlan models.

The strategy is one field, so every rule here depends on one parallel dimension and the
lattice judges it once per value.
"""

from __future__ import annotations

from engine.errors import Problem
from engine.sections.parallel import Strategy
from engine.stacks.families import family_of, rule_of

_STRATEGY = "parallelism.strategy"


def _refused(dim: str, size: int, why: str) -> Problem:
    return Problem(
        (f"parallelism.{dim}", _STRATEGY),
        f"parallelism.{dim} ({size}) > 1 cannot run under parallelism.strategy: {why}",
    )


def _why_not(strategy: Strategy, dim: str) -> str | None:
    """Why ``strategy``'s stack cannot run ``dim`` > 1, or None when it can."""
    family, stage = family_of(strategy), rule_of(strategy).zero_stage
    label = rule_of(strategy).label
    if family in ("megatron", "fsdp2"):
        return None
    if family == "fsdp1":
        if dim == "tp":
            return None
        return f"{label} has no {_NAMES[dim]} (use FSDP2 as torchtitan runs it, or Megatron)"
    if family == "ddp":
        if dim in ("tp", "pp"):
            return None
        return f"DDP (Hugging Face Trainer, accelerate) has no {_NAMES[dim]}"
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


_NAMES = {
    "tp": "tensor parallelism",
    "pp": "pipeline parallelism",
    "cp": "context parallelism",
    "ep": "expert parallelism",
}


def stack_problems(strategy: Strategy, dim: str, size: int) -> list[Problem]:
    """The reason ``strategy`` cannot run ``dim`` of ``size`` (empty when it can)."""
    if size <= 1:
        return []
    why = _why_not(strategy, dim)
    return [] if why is None else [_refused(dim, size, why)]
