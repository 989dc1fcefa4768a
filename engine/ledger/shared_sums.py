"""A stage's shared rows' allocated moment sums, for bounds that skip the activations.

:mod:`engine.ledger.stage_rows` builds a stage's rows as its *shared* rows (states,
gathered units, buckets, gradients, optimizer-step temporaries, checkpoint event,
runtime) plus its own activation rows and logits, and sums them moment by moment. The
layout search's bound on the low fit peak (:mod:`engine.layout.low_bound`) needs the
shared part exactly — a small share of an estimate's work — and bounds the activation
part from below; this module hands it out without duplicating how it is built.
"""

from __future__ import annotations

from engine.ledger.phases import Sums
from engine.ledger.shape_free import shape_free
from engine.ledger.stage_rows import Span, _shared, _shared_stage
from engine.plan import Plan


def shared_sums(plan: Plan, stage: int) -> tuple[Sums, Span]:
    """(allocated moment sums, runtime inside the verdict's capacity) of ``stage``'s
    shared rows in the resolved ``plan``, exactly as :func:`stage_rows` adds them (its
    activation rows never hold gradients)."""
    shared = _shared(shape_free(plan), _shared_stage(plan, stage), False)
    return shared.sums, shared.inside
