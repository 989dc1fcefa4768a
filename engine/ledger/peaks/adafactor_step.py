"""transformers' Adafactor step temporaries (``hbm.optimizer_step.temporaries``).

transformers 5.24 ``optimization.py`` ``Adafactor.step`` updates one parameter at a time,
so its peak is the largest parameter's working set, and it allocates that set on every
step (the range is exact, its low bound is not 0):

- ``grad.float()`` and ``p.float()``: an fp32 copy of each when it is 16-bit;
- ``update = grad**2 + eps``: the square and the sum are both live at the add;
- a factored (≥ 2-D) parameter then builds ``_approx_sq_grad``: ``r_factor`` (the row
  statistics' shape, fp32), ``c_factor`` (the column statistics'), and their product
  while the previous ``update`` is still referenced — two fp32 parameter-sized tensors
  plus both factors; a 1-D one builds ``exp_avg_sq.rsqrt()`` beside ``update``.

Measured: a bf16 embedding of 2048 × 256 peaks at 4 × 2 MiB + 8 KiB + 1 KiB, the sum
below (tests/engine/ledger/peaks/test_adafactor_step.py).
"""

from __future__ import annotations

from math import prod

from engine.ledger.held import HeldTensor
from engine.ledger.peaks.step_temporaries import step_temporaries_row
from engine.ledger.precision import DTYPE_BYTES
from engine.ledger.row import Row
from engine.ledger.states.allocs import shard_allocs
from engine.plan import Plan
from engine.stacks.families import StrategyRule
from engine.units import fmt_count, round_up

FP32 = 4


def _copies(t: HeldTensor) -> int:
    """fp32 copies ``step`` makes of this parameter's gradient and data (16-bit ones)."""
    return int(DTYPE_BYTES[t.grad_dtype] < FP32) + int(DTYPE_BYTES[t.param_dtype] < FP32)


def tensor_peak(shape: tuple[int, ...], copies: int, gran: int) -> int:
    """The live temporaries of one parameter's update, each rounded to ``gran``."""
    full = round_up(prod(shape) * FP32, gran)
    n = (copies + 2) * full
    if len(shape) >= 2:  # factored: exp_avg_sq_row is shape[:-1], exp_avg_sq_col the rest
        rows = round_up(prod(shape[:-1]) * FP32, gran)
        cols = round_up(prod((*shape[:-2], shape[-1])) * FP32, gran)
        n += rows + cols
    return n


def adafactor_temp_rows(plan: Plan, held: list[HeldTensor], rule: StrategyRule) -> list[Row]:
    """The largest parameter's step temporaries (exact: always allocated)."""
    trainable = [t for t in held if t.trainable]
    if not trainable:
        return []
    gran = plan.runtime.allocation_granularity_bytes
    best, where = 0, ""
    for t in trainable:
        (alloc,) = shard_allocs([t], rule.optimizer, rule, "param_dtype")
        copies = _copies(t)
        n = tensor_peak(alloc.shape, copies, gran)
        if n > best:
            shape = "×".join(str(d) for d in alloc.shape)
            best, where = n, f"{t.name} ({shape}, {copies} fp32 cop{'y' if copies == 1 else 'ies'})"
    formula = (
        f"one parameter at a time; largest: {where}: fp32 copies + grad² and update "
        f"(+ approx_sq_grad's product and row / column factors when factored) = "
        f"{fmt_count(best)} B"
    )
    return [step_temporaries_row(best, best, formula, "hf-adafactor")]
