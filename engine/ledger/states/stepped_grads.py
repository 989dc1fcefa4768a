"""The gradients' row when the optimizer steps inside backward (torchtune
``optimizer_in_bwd``): every gradient is stepped and freed as soon as it is accumulated,
so the model's gradients never exist together (see
:mod:`engine.ledger.peaks.optimizer_in_backward` for the one that is live)."""

from __future__ import annotations

from engine.ledger.row import NO_MOMENTS, Row, make_row

SOURCE = "torchtune-optimizer-in-bwd"


def stepped_in_backward(row: Row) -> Row:
    """The gradients' row when each is stepped and freed inside backward: 0 B, never live
    (the one live gradient is :func:`in_backward_rows`)."""
    return make_row(
        id=row.id,
        label=row.label,
        state="grads",
        location="hbm",
        kind="persistent",
        group="gradients",
        low=0,
        high=0,
        formula="0 B: each gradient is stepped and freed in backward (optimizer_in_bwd); "
        "the one live is hbm.grads.in_backward",
        source=SOURCE,
        moments=NO_MOMENTS,
        dtype=row.dtype,
    )
