"""Gradients that ``zero_grad(set_to_none=False)`` keeps allocated between steps.

``torch.optim.Optimizer.zero_grad(set_to_none=True)`` (torch's default) frees every
``.grad``; backward allocates them again, so the gradient rows are live from backward on
(:mod:`engine.ledger.states.rows`, :mod:`engine.ledger.peaks.backward_grads`). With
``set_to_none=False`` the step only zeroes them in place: after the first step every
gradient the rank holds stays allocated at every moment — the next forward included —
and backward accumulates into it. torchtitan's train step does this by default
(``torchtitan/trainer.py`` ``Trainer.train_step``: ``zero_grad(set_to_none=
self.config.training.disable_cuda_graphs)``, False unless CUDA graphs are off, since
#3559, 2026-08; at 9dec370, Dec 2024, it called ``zero_grad()``). ``runtime.zero_grad``
says which (``zero_fill``: kept).
"""

from __future__ import annotations

from functools import partial

from engine.ledger.row import ALL_PHASES, Formula, Row, moments_in, text
from engine.plan import Plan

_EVERY_MOMENT = moments_in(ALL_PHASES)
_KEPT = " (zero_grad(set_to_none=False): allocated at every moment, zeroed each step)"


def kept_between_steps(plan: Plan) -> bool:
    """Whether the plan's zero_grad keeps the gradients allocated (``zero_fill``)."""
    return plan.runtime.zero_grad == "zero_fill"


def grads_kept(rows: list[Row]) -> list[Row]:
    """``rows`` with every persistent HBM gradient row live at every moment of the step
    (each one is allocated once and only zeroed; other rows unchanged)."""
    return [
        r._replace(moments=_EVERY_MOMENT, formula_src=partial(_suffixed, r.formula_src))
        if r.state == "grads" and r.location == "hbm" and r.kind == "persistent"
        else r
        for r in rows
    ]


def _suffixed(formula: Formula) -> str:
    return text(formula) + _KEPT
