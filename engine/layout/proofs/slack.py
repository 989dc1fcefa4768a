"""How much a rank's peak can fall as DP grows within one regime of a shape: the FSDP
padding slack every proof by an estimate or a bound allows for (the regimes themselves:
:mod:`engine.layout.proofs.regimes`)."""

from __future__ import annotations

import math

from engine.allocator.reserve import share_bound
from engine.layout.lattice.padding import padding_context, share_in
from engine.layout.lattice.point import Layout
from engine.layout.proofs.evaluate import Outcome
from engine.ledger.peaks.runtime import reserve_factors
from engine.plan import Plan


def slack(plan: Plan, outcome: Outcome, figure: str = "high") -> int:
    """An upper bound on how much a rank's peak by ``figure`` ("high" or "low") can
    exceed that at a smaller DP of the same regime: only the padding FSDP adds to its
    gathered units and reduce-scatter inputs can shrink away with fewer ranks (sharded
    states only grow). It is at most the padded rows of the stage that figure is of —
    the heaviest stage's (``Outcome.padded``) for the high figure, which is the largest
    high of any stage's phases, and the stage of the largest low for the low figure
    (``Outcome.padded_low``), which is the largest low of any stage's phases: each such
    largest never falls with fewer ranks by more than its stage's padding — times the
    largest padding share of any unit at that layout; 0 when parameters are not
    gathered."""
    padded = outcome.padded if figure == "high" else outcome.padded_low
    return padded_slack(plan, outcome.layout, padded)


def padded_slack(plan: Plan, layout: Layout, padded_bytes: int) -> int:
    """:func:`slack` at ``layout`` of ``padded_bytes`` bytes of padded rows (an upper
    bound on them gives an upper bound on the slack): the padding they can lose, and
    the allocator reserve's share of it — the fit peak adds the reserve, a share of the
    allocated peak (``int(peak × factor)``, so at most one byte more for the rounding),
    which falls with it."""
    pad, padded = share_in(padding_context(plan), layout)
    if not pad:
        return 0
    lost = -(-padded_bytes * pad // padded)
    return lost + math.ceil(lost * share_bound(reserve_factors(plan))) + 2
