"""ZeRO-2's second gradient partition under gradient accumulation
(``hbm.grads.next_partition``, source review R7).

DeepSpeed 0.19.6 ``runtime/zero/stage_1_and_2.py``: every micro-step's reduce copies the
rank's part of each gradient into ``grads_in_partition``, allocated anew by
``copy_grads_in_partition`` when it is None. At the end of the micro-step
``independent_gradient_partition_epilogue`` keeps views of it in
``averaged_gradients`` (the first micro-step's become the accumulated sums; later ones
are added into them) and ``_release_ipg_buffers`` sets ``grads_in_partition`` to None.
So from the second micro-step on, the accumulated partition (``hbm.grads``, live across
the accumulation) and the micro-step's new one exist together from the first bucket's
reduce in backward to the epilogue: 2·P/N more at the layers' backward and its end.
With ZeRO-Offload the partition is on the host instead, so there is none on the GPU.
"""

from __future__ import annotations

from functools import partial

from engine.ledger.held import HeldTensor
from engine.ledger.row import Moment, Row, make_row
from engine.ledger.states.allocs import ShardContext
from engine.ledger.states.rows import grad_sized, suffixed
from engine.plan import Plan

NEXT_PARTITION_MOMENTS: frozenset[Moment] = frozenset(
    {"backward.layers", "backward.middle", "backward.end"}
)
"""From the first bucket's reduce in a micro-step's backward to its epilogue."""


def next_partition_rows(plan: Plan, held: list[HeldTensor], ctx: ShardContext) -> list[Row]:
    """The micro-step's new ZeRO-2 gradient partition while the accumulated one is
    kept (none at grad_accum 1, with ZeRO-Offload, or for any other strategy)."""
    rule = ctx.rule
    if (
        rule.family != "deepspeed"
        or rule.zero_stage != 2
        or plan.batch.grad_accum <= 1
        or plan.offload.optimizer != "none"
    ):
        return []
    trainable = [t for t in held if t.trainable]
    if not trainable:
        return []
    n, formula, dtypes = grad_sized(trainable, ctx)
    return [
        make_row(
            id="hbm.grads.next_partition",
            label=f"ZeRO-2 micro-step's new gradient partition ({dtypes})",
            state="grads",
            location="hbm",
            kind="peak",
            group="gradients",
            low=n,
            high=n,
            formula=partial(
                suffixed,
                formula,
                " (grads_in_partition made anew while averaged_gradients"
                " keeps the accumulated one)",
            ),
            source="deepspeed-zero2-accumulation",
            moments=NEXT_PARTITION_MOMENTS,
            dtype=dtypes,
        )
    ]
