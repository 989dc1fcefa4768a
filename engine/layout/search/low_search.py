"""The validation-low search, bounded first by a cheaper layout already known to fit.

The three counts' searches run in turn (:func:`engine.layout.search.counts.gpu_counts`): the
high search's estimates carry both figures, so when the low search begins, some of
them may already fit by the low figure at less than its start costs. Searching every
shape only up to the cheapest of those spares the low search its probes of the worlds
between — one low bound or estimate per shape, most of them proofs that fail.
"""

from __future__ import annotations

from engine.layout.lattice.point import Layout
from engine.layout.proofs.evaluate import Evaluator, Outcome
from engine.layout.proofs.regimes import SearchMemo
from engine.layout.search.budget import Budget
from engine.layout.search.minimum import LOW, Cost, Found, search_growing


def low_search(
    ev: Evaluator,
    shapes: list[Layout],
    max_gpus: int,
    cost: Cost,
    budget: Budget,
    start: Found | None,
    memo: SearchMemo,
    g: int,
) -> Found | None:
    """The validation-low search from ``start``, bounded first by the cheapest layout
    the search has already estimated that fits by the low figure (the high search's
    estimates carry both figures, and one may fit by the low figure at less than the
    high search's answer, the low search's start): every shape is then searched only up
    to that cost, not up to ``start``'s.

    The same answer as from ``start`` alone. That cheaper layout of cost C is not made
    the start (a start wins ties, and the preference order must decide them): the search
    starts from a stand-in costing C + 1, so it searches every layout costing at most C
    and, being exact, finds the preferred one of the least cost — which costs at most C,
    below ``start``'s cost, where the search from ``start`` finds the same. If it finds
    nothing (the cheaper layout is the plan's own, outside the legal shapes), the search
    runs from ``start``."""
    cheaper = cheapest_low_fit(ev, cost)
    if cheaper is not None and (start is None or cost(cheaper.layout.world_size) < start.cost):
        stand_in = Found(cheaper, cost(cheaper.layout.world_size) + 1)
        found = search_growing(ev, shapes, max_gpus, cost, LOW, budget, stand_in, memo, g)
        if found is not stand_in:
            return found
    return search_growing(ev, shapes, max_gpus, cost, LOW, budget, start, memo, g)


def cheapest_low_fit(ev: Evaluator, cost: Cost) -> Outcome | None:
    """The least costly outcome estimated so far that fits by the low figure."""
    fits = [o for o in ev.outcomes if o.fits_low]
    return min(fits, key=lambda o: cost(o.layout.world_size), default=None)
