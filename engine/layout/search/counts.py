"""The three GPU counts — the decision a user buys with — each with its reasons.

1. Arithmetic minimum: the fewest ranks whose *high* estimate fits the limit (usable
   HBM less the headroom policy): TP any divisor within a node, no rounding to nodes.
2. First legal layout: the cheapest layout under the practical rules, and its
   procurement count (a single GPU, a partial node or whole nodes:
   engine.layout.search.procure).
3. Validation range: the topology-rounded minimum by the *low* estimate and the first
   practical layout by the *high* one; when they differ the range straddles the
   limit and a measurement on the smaller count decides.

The plan's own layout is estimated first and takes part in every count: when it fits,
it wins every tie, so the procurement count, its layout and the plan on screen agree
(the plan's DP 8 is not traded for a DP 7 that costs the same node). Alongside: the
fitting alternatives at the procurement size ranked by headroom, and the rejected
layouts with their reasons. A count that finds nothing names the closest layout
(:mod:`engine.layout.search.closest`). A time budget bounds the search; a search
stopped by it says how far it got. ``gpu_counts`` is pure: the GUI, the report and the CLI call it
with the same plan and get the same answer.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from engine.layout.lattice.batch import (
    accumulation_words,
    batch_change,
    step_words,
    target_global_batch,
)
from engine.layout.lattice.shapes import (
    Layout,
    LayoutPreferences,
    Rejected,
    every_layout_refused,
    layout_of,
    legal_shapes,
)
from engine.layout.proofs.evaluate import Estimator, Evaluator, Outcome
from engine.layout.proofs.regimes import SearchMemo
from engine.layout.search.alternatives import fill_bought, ranked_alternatives
from engine.layout.search.budget import Budget, BudgetSpent, Clock
from engine.layout.search.closest import closer, closest_candidates
from engine.layout.search.collector import collector_paused
from engine.layout.search.low_search import low_search
from engine.layout.search.minimum import HIGH, LOW, Criterion, Found, search_growing
from engine.layout.search.procure import procurement, shape_words
from engine.plan import Plan
from engine.units import fmt_bytes

SEARCH_BUDGET_S = 20.0
"""Wall-clock seconds one search may take before it stops and says so: extreme plans
(thousands of layers) stop here instead of running for minutes."""


@dataclass(frozen=True, slots=True)
class Count:
    """One of the counts: the layout behind it (if any), GPUs paid for, and why."""

    gpus: int | None
    layout: Layout | None
    outcome: Outcome | None
    reason: str

    @property
    def world_size(self) -> int | None:
        return self.layout.world_size if self.layout else None


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
        whole nodes; :func:`engine.layout.search.procure.shape_words`)."""
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


def _words(o: Outcome) -> str:
    return (
        f"high estimate {fmt_bytes(o.high)} per rank within the limit "
        f"{fmt_bytes(o.limit)} ({fmt_bytes(o.headroom)} to spare)"
    )


def _none_fits(
    plan: Plan,
    outcomes: list[Outcome],
    max_gpus: int,
    criterion: Criterion,
    stopped: bool,
    every: bool = False,
) -> Count:
    """A count that found nothing: why, naming the closest of ``outcomes`` that fails
    the criterion (node ledgers fitting first, then the most headroom; the earliest of
    equals); ``every``: those hold the closest of every shape's largest DP per regime
    (:mod:`engine.layout.search.closest`), which the reason then says."""
    what = criterion.figure
    tried = [o for o in outcomes if o.ok and not criterion.accept(o)]
    bound = f"up to {max_gpus} GPUs" + (
        " (the search stopped at its time budget)" if stopped else ""
    )
    if not tried:
        errors = sorted({o.error or "" for o in outcomes})
        refused = "; ".join(every_layout_refused(plan))
        why = f"; estimates failed: {errors[0]}" if errors else ""
        why = f"; every layout is refused: {refused}" if refused else why
        return Count(None, None, None, f"no legal layout {bound}{why}")
    best = tried[0]
    for o in tried[1:]:
        if closer(o, best):
            best = o
    need = best.high if what == "high" else best.low
    nodes = "".join(f"; {p}" for p in best.node_problems)
    of = " (of the search's estimates and every shape's largest DP per regime, TP within a node)"
    of = of if every else " estimated"
    return Count(
        None,
        None,
        best,
        f"no layout {bound} fits by the {what} estimate; the closest{of}, "
        f"{best.layout.label()}, needs {fmt_bytes(need)} per rank against a limit of "
        f"{fmt_bytes(best.limit)}{nodes}",
    )


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
    (:func:`engine.layout.search.closest.closest_candidates`, over the shapes of every count:
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
    every = False  # the closest is that of every candidate (engine.layout.search.closest)
    if not stopped and None in (first, low, arith):
        every = _closest(ev, max_gpus, prefs, budget, memo)
        stopped = budget.spent
    tried = ev.outcomes
    notes = []
    if stopped:
        notes.append(
            f"searched {len(ev.outcomes):,} layouts in {budget.elapsed():.1f} s; stopped at "
            f"the budget ({budget.seconds:g} s): the counts are the best found so far"
        )
    arith_c = (
        _arith_count(plan, arith, g)
        if arith
        else _none_fits(plan, tried, max_gpus, HIGH, stopped, every)
    )
    first_c = (
        _first_count(plan, first, g, rounding, own)
        if first
        else _none_fits(plan, tried, max_gpus, HIGH, stopped, every)
    )
    low_c = (
        Count(
            low.cost,
            low.outcome.layout,
            low.outcome,
            f"{low.outcome.layout.label()} fits by the low estimate "
            f"{fmt_bytes(low.outcome.low)} on {low.cost} GPUs",
        )
        if low
        else _none_fits(plan, tried, max_gpus, LOW, stopped, every)
    )
    straddles = bool(low and first and low.cost < first.cost)
    skip = stopped or not alternatives
    ranked, rejected = ((), ()) if skip else ranked_alternatives(ev, first, max_gpus, prefs)
    return GpuCounts(
        arithmetic_min=arith_c,
        first_layout=first_c,
        validation_low=low_c,
        validation_high=first_c,
        straddles=straddles,
        validation_reason=_validation_words(low, first),
        alternatives=ranked,
        rejected=rejected,
        gpus_per_node=g,
        rounding=rounding,
        max_gpus=max_gpus,
        limit_bytes=plan.hbm_limit_bytes,
        capacity_bytes=plan.hardware.capacity_bytes,
        estimates=ev.calls,
        notes=tuple(notes),
        plan_layout=own,
        stopped=stopped,
        seq_len=plan.batch.seq_len,
        plan_batch=target_global_batch(plan),
    )


def _batch_words(plan: Plan, lay: Layout) -> str:
    moved = batch_change(plan, lay.global_batch)
    return accumulation_words(plan, lay.pp, lay.grad_accum) + (
        f"; global batch {step_words(lay.global_batch, plan.batch.seq_len)}"
        + (f" ({moved})" if moved else "")
    )


def _arith_count(plan: Plan, found: Found, g: int) -> Count:
    o = found.outcome
    w = o.layout.world_size
    nodes = -(-w // g)
    own = " (the plan's own layout)" if o.layout == layout_of(plan) else ""
    return Count(
        w,
        o.layout,
        o,
        f"{w} ranks ({o.layout.label()}{own}; {_batch_words(plan, o.layout)}) is the least "
        f"whose {_words(o)}, counting ranks, not nodes, TP any divisor within a node "
        f"(rounded up: {nodes} node(s) of {g}); every smaller count's high estimate exceeds "
        f"the limit or cannot be laid out with PP ≤ {plan.policy.max_pp} (policy.max_pp)",
    )


def _first_count(plan: Plan, found: Found, g: int, rounding: str, own: Outcome | None) -> Count:
    o = found.outcome
    w = o.layout.world_size
    paid = shape_words(found.cost, g, rounding)
    idle = f", {found.cost - w} of them idle unless DP grows" if found.cost > w else ""
    if own is not None and o.layout == own.layout:
        head = f"the plan's own layout {o.layout.label()} on {w} ranks fits"
    else:
        head = (
            f"{o.layout.label()} on {w} ranks is the first legal layout (TP inside a node, "
            f"power-of-two TP, whole heads, layers, sequence and experts, a full pipeline "
            f"of PP ≤ {plan.policy.max_pp} (policy.max_pp), reachable batch) that fits"
        )
    mine = ""
    if own is not None and o.layout != own.layout:
        if own.fits_high:
            mine = (
                f"; the plan's own layout {own.layout.label()} also fits, on "
                f"{own.layout.world_size} ranks"
            )
        elif own.ok:
            extra = "".join(f"; {p}" for p in own.node_problems)
            mine = (
                f"; the plan's own layout {own.layout.label()} does not fit "
                f"({fmt_bytes(own.high)} per rank{extra}): lay the plan out as above"
            )
    return Count(
        found.cost,
        o.layout,
        o,
        f"{head}: its {_words(o)}; {_batch_words(plan, o.layout)}; procure {paid}{idle}{mine}",
    )


def _validation_words(low: Found | None, high: Found | None) -> str:
    if high is None:
        return "no layout fits by the high estimate within the search bound"
    if low is None or low.cost >= high.cost:
        return (
            f"low and high estimates agree: {high.cost} GPUs; the range does not straddle the limit"
        )
    return (
        f"the range straddles the limit: the low estimate fits on {low.cost} GPUs "
        f"({low.outcome.layout.label()}) but the high estimate needs {high.cost} "
        f"({high.outcome.layout.label()}); measure the peak on {low.cost} GPUs before "
        f"buying, and take {high.cost} if it exceeds the limit"
    )
