"""The optimizer step fused into backward (``method.optimizer.in_backward``).

torchtune ``optimizer_in_bwd`` (torchtune/training/memory.py
``register_optim_in_bwd_hooks`` and ``create_optim_in_bwd_wrapper``; source
``torchtune-optimizer-in-bwd``) builds one optimizer per parameter and registers a
``register_post_accumulate_grad_hook`` that runs ``optimizer.step()`` and
``optimizer.zero_grad()`` (``set_to_none``) as soon as the parameter's gradient is
accumulated. So no moment holds the model's gradients: each exists from its
``AccumulateGrad`` to the end of its own step, one parameter at a time, and there is no
optimizer phase after backward. What the ledger then counts:

- ``hbm.grads`` holds nothing (0 B, no moment):
  :func:`engine.ledger.states.stepped_grads.stepped_in_backward`;
- ``hbm.grads.in_backward``: the largest trainable tensor's gradient and the temporaries
  of its own step (the foreach / for-loop AdamW copies of one parameter, as
  :func:`engine.ledger.peaks.optimizer_step.optimizer_temp_rows` sizes them for that one
  tensor), live while the layers' backward runs;
- no ``hbm.grads.before_first_layer`` and no ``hbm.optimizer_step.*`` rows.

torchtune refuses it with gradient accumulation (``gradient_accumulation_steps`` must be
1): the plan's grad_accum is not read here.
"""

from __future__ import annotations

from engine.ledger.held import HeldTensor, recounted
from engine.ledger.peaks.optimizer_step import optimizer_temp_rows
from engine.ledger.row import BACKWARD, IN_LAYERS, Row, make_row
from engine.ledger.states.allocs import ShardContext
from engine.ledger.states.rows import grad_sized
from engine.ledger.states.stepped_grads import SOURCE
from engine.plan import Plan
from engine.units import fmt_count


def in_backward_rows(plan: Plan, held: list[HeldTensor], ctx: ShardContext) -> list[Row]:
    """The largest trainable tensor's gradient and its own step's temporaries."""
    trainable = [t for t in held if t.trainable]
    if not trainable:
        return []
    largest = max(trainable, key=lambda t: t.numel)
    one = recounted(largest, 1)  # one layer's copy of a folded tensor
    grad, _, dtypes = grad_sized([one], ctx)
    steps = optimizer_temp_rows(plan, [one], ctx.rule)
    low = grad + sum(r.low for r in steps)
    temps = sum(r.high for r in steps)
    total = grad + temps
    span = fmt_count(temps) if low == total else f"{fmt_count(low - grad)}–{fmt_count(temps)}"
    return [
        make_row(
            id="hbm.grads.in_backward",
            label="Gradient being stepped in backward (one parameter)",
            state="grads",
            location="hbm",
            kind="peak",
            group="gradients",
            low=low,
            high=total,
            formula=f"largest parameter {largest.name} ({fmt_count(one.numel)} el.): "
            f"gradient {fmt_count(grad)} B ({dtypes}) + its step's temporaries "
            f"{span} B",
            source=SOURCE,
            phases=BACKWARD,
            backward=IN_LAYERS,
            dtype=dtypes,
        )
    ]
