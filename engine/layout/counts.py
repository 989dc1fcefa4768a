"""The three GPU counts — the decision a user buys with — each with its reasons.

1. Arithmetic minimum: the fewest ranks whose *high* estimate fits the limit (usable
   HBM less the headroom policy): TP any divisor within a node, no rounding to nodes.
2. First legal layout: the cheapest layout under the practical rules, and its
   procurement count (a single GPU, a partial node or whole nodes:
   :func:`engine.layout.point.procurement`).
3. Validation range: the topology-rounded minimum by the *low* estimate and the first
   practical layout by the *high* one; when they differ the range straddles the
   limit and a measurement on the smaller count decides (:func:`validation_range`
   spells it the same everywhere).

The plan's own layout is estimated first and takes part in every count: when it fits,
it wins every tie, so the procurement count, its layout and the plan on screen agree
(the plan's DP 8 is not traded for a DP 7 that costs the same node). Alongside: the
fitting alternatives at the procurement size ranked by headroom, the rejected layouts
with their reasons, and for a count that finds nothing the closest layout
(:mod:`engine.layout.beside`). A time budget bounds the search; a search stopped by it
says how far it got. ``gpu_counts`` is pure: the GUI, the report and the CLI call it
with the same plan and get the same answer. It runs with Python's cyclic collector
paused (:func:`collector_paused`).
"""

from __future__ import annotations

import gc
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from engine.layout.beside import (
    Count,
    arith_count,
    closest_candidates,
    fill_bought,
    first_count,
    low_count,
    none_fits,
    ranked_alternatives,
    validation_words,
)
from engine.layout.minimum import HIGH, LOW, Cost, Criterion, Found, search_growing
from engine.layout.point import (
    Layout,
    procurement,
    shape_words,
    target_global_batch,
)
from engine.layout.proofs.evaluate import Budget, BudgetSpent, Clock, Estimator, Evaluator, Outcome
from engine.layout.proofs.regimes import SearchMemo
from engine.layout.shapes import (
    LayoutPreferences,
    Rejected,
    every_layout_refused,
    layout_of,
    legal_shapes,
)
from engine.plan import Plan

THAW_EVERY = 32
"""One outermost pause in this many ends by thawing instead of freezing."""

_lock = threading.Lock()
_depth = 0
_resume = False
_ends = 0


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic collector for the ``with`` block, and freeze what it leaves alive.

    A search builds hundreds of thousands of short-lived objects while the engine's
    caches keep a few hundred thousand long-lived ones; generational collections
    triggered by the allocations walk the caches' objects again, none of them garbage
    (``tests/bench_engine.py`` prints the cost). Turning the collector back on is not the
    end of it: what the paused search kept is in the youngest generation, and the first
    collection would walk it all; so the outermost pause ends with :func:`gc.freeze`
    (collections skip frozen objects; reference counting still frees them). Freezing
    would keep cyclic garbage pending then: a search leaves none (``test_collector.py``),
    and every :data:`THAW_EVERY`-th pause thaws instead, handing everything back to the
    oldest generation. Process-wide by nature, so counted: nested and concurrent
    searches (the GUI's worker threads) restore the collector when the last one ends,
    and only if it was enabled when the first began (nothing is frozen then)."""
    global _depth, _resume
    with _lock:
        if _depth == 0:
            _resume = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _resume:
                _settle()
                gc.enable()


def _settle() -> None:
    """Freeze what is alive as the last pause ends — or, one time in
    :data:`THAW_EVERY`, thaw everything frozen so far (called under the lock)."""
    global _ends
    _ends += 1
    if _ends % THAW_EVERY:
        gc.freeze()
    else:
        gc.unfreeze()


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


SEARCH_BUDGET_S = 20.0
"""Wall-clock seconds one search may take before it stops and says so: extreme plans
(thousands of layers) stop here instead of running for minutes."""


@dataclass(frozen=True, slots=True)
class GpuCounts:
    """The three counts with reasons, the plan's own layout, ranked alternatives and
    rejected layouts."""

    arithmetic_min: Count
    first_layout: Count
    validation_low: Count
    validation_high: Count
    straddles: bool
    validation_reason: str
    alternatives: tuple[Outcome, ...]
    rejected: tuple[Rejected, ...]
    gpus_per_node: int
    rounding: str
    max_gpus: int
    limit_bytes: int
    capacity_bytes: int
    estimates: int = 0
    notes: tuple[str, ...] = field(default=())
    plan_layout: Outcome | None = None  # the plan's own layout, estimated
    stopped: bool = False  # the time budget ran out before the search finished
    seq_len: int = 0  # the plan's sequence: a layout's tokens per step = global batch × it
    plan_batch: int = 0  # the global batch the plan runs (target_global_batch)

    @property
    def nodes(self) -> int | None:
        g = self.first_layout.gpus
        return None if g is None else -(-g // self.gpus_per_node)

    @property
    def shape(self) -> str:
        """What the procurement count buys, in words (a single GPU, a partial node,
        whole nodes; :func:`engine.layout.point.shape_words`)."""
        g = self.first_layout.gpus
        return "none found" if g is None else shape_words(g, self.gpus_per_node, self.rounding)

    @property
    def chosen(self) -> Outcome | None:
        """The layout the plan runs with: its own when it fits, else the procurement
        count's layout."""
        own = self.plan_layout
        if own is not None and own.fits_high:
            return own
        return self.first_layout.outcome if self.first_layout.layout is not None else None

    def rejection_summary(self, top: int = 3) -> list[tuple[str, int]]:
        """The most frequent rejection reasons at the procurement size, with counts."""
        counter = Counter(r for x in self.rejected for r in x.reasons)
        return counter.most_common(top)


Seeds = tuple[Found | None, Found | None, Found | None]
"""What the searches start from (first, low, arithmetic minimum): the plan's own layout."""


def _seeds(own: Outcome | None, g: int, rounding: str) -> Seeds:
    if own is None:
        return None, None, None
    w = own.layout.world_size
    if own.fits_high:
        first = Found(own, procurement(w, g, rounding))
        return first, first, Found(own, w)
    return None, (Found(own, procurement(w, g, rounding)) if own.fits_low else None), None


def _search(
    ev: Evaluator,
    max_gpus: int,
    prefs: LayoutPreferences,
    budget: Budget,
    seeds: Seeds,
    memo: SearchMemo,
) -> Seeds:
    """The three searches (procurement by the high estimate, validation low, arithmetic
    minimum), each started from the seeds, sharing one memo; what they found when the
    budget ran out."""
    plan = ev.plan
    g, rounding = plan.hardware.gpus_per_node, plan.policy.rounding

    def node_cost(w: int) -> int:
        return procurement(w, g, rounding)

    def exact(w: int) -> int:
        return w

    first, low, arith = seeds
    try:
        strict = legal_shapes(plan, max_gpus, prefs)
        first = search_growing(ev, strict, max_gpus, node_cost, HIGH, budget, first, memo, g)
        first = fill_bought(ev, first, prefs)  # every GPU bought used, when a layout fits
        low = low_search(ev, strict, max_gpus, node_cost, budget, low or first, memo, g)
        start = Found(first.outcome, first.outcome.layout.world_size) if first else None
        if arith is not None and (start is None or arith.cost <= start.cost):
            start = arith
        relaxed = legal_shapes(plan, max_gpus, prefs.relaxed())
        arith = search_growing(ev, relaxed, max_gpus, exact, HIGH, budget, start, memo, 1)
    except BudgetSpent:
        pass
    return first, low, arith


def _closest(
    ev: Evaluator, max_gpus: int, prefs: LayoutPreferences, budget: Budget, memo: SearchMemo
) -> bool:
    """Estimate the layouts a count that found nothing may name as the closest
    (:func:`engine.layout.beside.closest_candidates`, over the shapes of every count:
    the arithmetic minimum's); whether all were estimated or ruled out within the
    budget and the estimates' cap."""
    try:
        relaxed = legal_shapes(ev.plan, max_gpus, prefs.relaxed())
        return closest_candidates(ev, memo, relaxed, max_gpus, budget)
    except BudgetSpent:
        return False


@collector_paused()
def gpu_counts(
    plan: Plan,
    max_gpus: int | None = None,
    prefs: LayoutPreferences | None = None,
    estimator: Estimator | None = None,
    budget_s: float | None = SEARCH_BUDGET_S,
    clock: Clock | None = None,
    alternatives: bool = True,
) -> GpuCounts:
    """The three counts of a plan, searched up to ``max_gpus`` (default: the policy's)
    within ``budget_s`` seconds (None: unbounded; ``clock`` replaces the wall clock).
    ``alternatives`` False ranks no alternatives nor rejections (a fit lever shows only
    its counts; the ranking estimates every legal layout of the procurement size).
    ``estimator`` (default: the ledger's) replaces the estimate; the floors and bounds
    of :mod:`engine.layout.proofs` then stay off (they read the ledger's rows), and the
    regimes' padding slack reads the estimator's own rows."""
    prefs = prefs or LayoutPreferences()
    max_gpus = max_gpus or plan.policy.max_gpus
    g, rounding = plan.hardware.gpus_per_node, plan.policy.rounding
    ev = Evaluator(plan, estimator)
    budget = Budget(budget_s) if clock is None else Budget(budget_s, clock)
    own_layout = layout_of(plan)
    refused = bool(every_layout_refused(plan)) or own_layout.world_size > max_gpus
    own = None if refused else ev(own_layout)
    seeded = _seeds(own, g, rounding)
    # one set of DP-dependent preferences, candidates and proofs for every search
    memo = SearchMemo(plan, prefs.pipeline_full, prefs.max_padding_share)
    first, low, arith = _search(ev, max_gpus, prefs, budget, seeded, memo)
    stopped = budget.spent
    every = False  # the closest is that of every candidate (engine.layout.beside)
    if not stopped and None in (first, low, arith):
        every = _closest(ev, max_gpus, prefs, budget, memo)
        stopped = budget.spent
    notes: tuple[str, ...] = ()
    if stopped:
        notes = (
            f"searched {len(ev.outcomes):,} layouts in {budget.elapsed():.1f} s; stopped at "
            f"the budget ({budget.seconds:g} s): the counts are the best found so far",
        )

    def missing(criterion: Criterion) -> Count:
        return none_fits(plan, ev.outcomes, max_gpus, criterion, stopped, every)

    arith_c = arith_count(plan, arith, g) if arith else missing(HIGH)
    first_c = first_count(plan, first, g, rounding, own) if first else missing(HIGH)
    low_c = low_count(low) if low else missing(LOW)
    straddles = bool(low and first and low.cost < first.cost)
    skip = stopped or not alternatives
    ranked, rejected = ((), ()) if skip else ranked_alternatives(ev, first, max_gpus, prefs)
    return GpuCounts(
        arithmetic_min=arith_c,
        first_layout=first_c,
        validation_low=low_c,
        validation_high=first_c,
        straddles=straddles,
        validation_reason=validation_words(low, first),
        alternatives=ranked,
        rejected=rejected,
        gpus_per_node=g,
        rounding=rounding,
        max_gpus=max_gpus,
        limit_bytes=plan.hbm_limit_bytes,
        capacity_bytes=plan.hardware.capacity_bytes,
        estimates=ev.calls,
        notes=notes,
        plan_layout=own,
        stopped=stopped,
        seq_len=plan.batch.seq_len,
        plan_batch=target_global_batch(plan),
    )


def ascending(low: int | None, high: int | None) -> str:
    """A GPU-count range, ascending and with equal ends written once ("4", "4–8"); an
    open end (no layout fits within the search) reads "at least 8", never "8–None"."""
    if high is None:
        return "none" if low is None else f"at least {low}"
    if low is not None and low > high:
        low, high = high, low
    return str(low) if low == high else f"{low}–{high}"


def validation_range(c: GpuCounts) -> str:
    """The validation range as GPUs to buy ("4–8 GPUs"), with the ranks its layouts use
    when they differ ("8 GPUs (layouts of 1–2 ranks)") and "(straddles)" when the low
    and high estimates disagree: the same words everywhere the range is shown (the
    window, the CLI, the comparison and the PDF report).

    The counts are GPUs to buy, low then high (the search makes them ascending); the
    ranks do not ascend with them (a 4-rank layout can fit by the low estimate where a
    2-rank one fits by the high, both on one 4-GPU node), so they are written as their
    own ascending range, never as a second "low–high" that reads backwards."""
    lo, hi = c.validation_low, c.validation_high
    text = ascending(lo.gpus, hi.gpus)
    if text == "none":
        return "none found"
    text += " GPUs" if text != "1" else " GPU"
    if lo.layout is not None and hi.layout is not None:
        ranks = ascending(lo.layout.world_size, hi.layout.world_size)
        if ranks != ascending(lo.gpus, hi.gpus):
            text += f" (layouts of {ranks} rank{'s' if ranks != '1' else ''})"
    return text + (" (straddles)" if c.straddles else "")
