"""The one row an optimizer step's temporaries take (``hbm.optimizer_step.temporaries``).

Every optimizer implementation (torch's AdamW / SGD in :mod:`engine.ledger.peaks.optimizer_step`,
transformers' Adafactor in :mod:`engine.ledger.peaks.adafactor_step`) reports its step's
scratch memory under the same id, group and phase; only its bytes, formula and source
differ, so the row is made here once.
"""

from __future__ import annotations

from engine.ledger.row import OPTIMIZER, Formula, Row, make_row


def step_temporaries_row(low: int, high: int, formula: Formula, source: str) -> Row:
    """The optimizer step's temporaries: a peak in the optimizer phase."""
    return make_row(
        id="hbm.optimizer_step.temporaries",
        label="Optimizer step temporaries",
        state="optimizer_step",
        location="hbm",
        kind="peak",
        group="temporaries",
        low=low,
        high=high,
        formula=formula,
        source=source,
        phases=OPTIMIZER,
    )
