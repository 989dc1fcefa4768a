"""torchao's 8-bit AdamW step: one parameter at a time, compiled from fp32 upcasts.

torchao/prototype/low_bit_optim/adam.py (ao 26648c2, the torchao of torchtune's November
2024 README, source ``torchao-low-bit-optim``): ``_AdamBase.step`` loops over the
parameters and calls ``torch.compile(single_param_adam, fullgraph=True,
dynamic=False)`` on each one. ``single_param_adam`` works in fp32: ``p_f32 =
p.float()``, ``grad_f32 = grad.float()``, ``exp_avg_f32 = exp_avg.float().lerp(...)``
and ``exp_avg_sq_f32 = exp_avg_sq.float().lerp(...)`` (the 8-bit states dequantized,
``OptimState8bit`` ``aten.lerp``), requantizes both moments (``copy_``: a block-wise
amax, then the code search) and writes ``p.copy_(p_f32)``. So the step's scratch is
that of one parameter — the largest one bounds it — and how much of it Inductor keeps
as buffers is not known here: where every upcast fuses into the kernels that read them,
none (the low end, 0); where each named fp32 tensor is a buffer, four copies of the
parameter at 4 B an element (the high end). (A hand-written copy of the step compiled by
torch 2.13's Inductor for the CPU keeps the two dequantized, lerped moments as fp32
buffers — two copies — in one fused kernel; the GPU's choice in the run's torch is not
traced.) Under torchtune's ``optimizer_in_bwd`` the
step runs inside backward, from the parameter's post-accumulate-grad hook
(:mod:`engine.ledger.peaks.optimizer_in_backward`).
"""

from __future__ import annotations

from engine.ledger.held import HeldTensor
from engine.ledger.peaks.step_temporaries import step_temporaries_row
from engine.ledger.row import Row
from engine.ledger.states.optimizers import TORCHAO_SOURCE
from engine.sections.method import OptimizerSection
from engine.stacks.families import StrategyRule
from engine.units import fmt_count, round_up

FP32_UPCASTS = 4
"""p_f32, grad_f32, exp_avg_f32, exp_avg_sq_f32: the fp32 tensors single_param_adam names."""


def compiled_step(opt: OptimizerSection) -> bool:
    """Whether the optimizer is torchao's 8-bit AdamW (a compiled per-parameter step)."""
    return opt.name == "adam8bit" and opt.adam8bit_library == "torchao"


def largest_numel(trainable: list[HeldTensor], rule: StrategyRule) -> int:
    """Elements of the largest tensor the optimizer steps (its shard where the optimizer
    is sharded: ``ceil(d0 / N)`` rows of it)."""
    best = 0
    for t in trainable:
        n = t.group if rule.optimizer else 1
        if n == 1 or not t.shape:
            numel = t.numel
        else:
            d0 = t.shape[0]
            numel = -(-d0 // n) * (t.numel // d0) if d0 else 0
        best = max(best, numel)
    return best


def step_span(numel: int, gran: int) -> tuple[int, int]:
    """(low, high) bytes of one parameter's compiled step scratch (module doc)."""
    return 0, FP32_UPCASTS * round_up(numel * 4, gran)


def step_words(numel: int) -> str:
    """The scratch's formula in words."""
    return (
        f"torchao compiled step of the largest parameter ({fmt_count(numel)} el.): 0 "
        f"(fused) – {FP32_UPCASTS} fp32 upcasts (p, grad, exp_avg, exp_avg_sq) × "
        f"{fmt_count(numel)}·4"
    )


def torchao_step_rows(
    opt: OptimizerSection, held: list[HeldTensor], rule: StrategyRule, gran: int
) -> list[Row]:
    """The optimizer phase's temporaries of torchao's 8-bit AdamW (module doc)."""
    numel = largest_numel([t for t in held if t.trainable], rule)
    if not numel:
        return []
    low, high = step_span(numel, gran)
    words = step_words(numel)
    return [
        step_temporaries_row(low, high, lambda: f"{words} = {fmt_count(high)} B", TORCHAO_SOURCE)
    ]
