"""The three GPU counts — the decision a user buys with — each with its reasons.

1. Arithmetic minimum: the fewest ranks whose *high* estimate fits the limit (usable
   HBM less the headroom policy), ignoring topology (TP may cross nodes or be any
   divisor; no rounding to nodes).
2. First legal layout: the cheapest layout under the practical rules, and its
   procurement count (whole nodes of the chosen hardware, or GPUs if the policy says).
3. Validation range: the topology-rounded minimum by the *low* estimate and the first
   practical layout by the *high* one; when they differ the range straddles the
   limit and a measurement on the smaller count decides.

Plus the top alternatives at the procurement size ranked by headroom, and the rejected
layouts with their reasons. ``gpu_counts`` is pure: the GUI, the report and the CLI
call it with the same plan and get the same answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.layout.evaluate import Estimator, Evaluator, Outcome
from engine.layout.lattice import (
    Layout,
    LayoutPreferences,
    Rejected,
    check,
    enumerate_layouts,
    every_layout_refused,
    legal_shapes,
)
from engine.layout.search import Found, procurement, search_min
from engine.plan import Plan
from engine.units import fmt_bytes

ALTERNATIVES_SHOWN = 5
ALTERNATIVES_EVALUATED = 16
"""Legal layouts of the procurement size estimated for the alternatives, in preference
order (the lattice of a large world can hold hundreds)."""


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
    """The three counts with reasons, ranked alternatives and rejected layouts."""

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

    @property
    def nodes(self) -> int | None:
        g = self.first_layout.gpus
        return None if g is None else -(-g // self.gpus_per_node)


def _words(o: Outcome) -> str:
    return (
        f"high estimate {fmt_bytes(o.high)} per rank within the limit "
        f"{fmt_bytes(o.limit)} ({fmt_bytes(o.headroom)} to spare)"
    )


def _none_fits(ev: Evaluator, max_gpus: int, what: str) -> Count:
    tried = [o for o in ev.outcomes if o.ok]
    if not tried:
        errors = sorted({o.error or "" for o in ev.outcomes})
        refused = "; ".join(every_layout_refused(ev.plan))
        why = f"; estimates failed: {errors[0]}" if errors else ""
        why = f"; every layout is refused: {refused}" if refused else why
        return Count(None, None, None, f"no legal layout up to {max_gpus} GPUs{why}")
    best = max(tried, key=lambda o: o.headroom)
    return Count(
        None,
        None,
        best,
        f"no layout up to {max_gpus} GPUs fits by the {what} estimate; the closest, "
        f"{best.layout.label()}, needs {fmt_bytes(best.high if what == 'high' else best.low)} "
        f"per rank against a limit of {fmt_bytes(best.limit)}",
    )


def gpu_counts(
    plan: Plan,
    max_gpus: int | None = None,
    prefs: LayoutPreferences | None = None,
    estimator: Estimator | None = None,
) -> GpuCounts:
    """The three counts of a plan, searched up to ``max_gpus`` (default: the policy's).

    ``estimator`` defaults to :func:`engine.estimate.estimate`; it is a parameter so
    the search stays a black box over whatever the ledger counts.
    """
    prefs = prefs or LayoutPreferences()
    max_gpus = max_gpus or plan.policy.max_gpus
    g, rounding = plan.hardware.gpus_per_node, plan.policy.rounding
    ev = Evaluator(plan, estimator)

    def node_cost(w: int) -> int:
        return procurement(w, g, rounding)

    def exact(w: int) -> int:
        return w

    strict = legal_shapes(plan, max_gpus, prefs)
    relaxed = legal_shapes(plan, max_gpus, prefs.relaxed())
    notes: list[str] = []
    if len({s.cp for s in strict}) > 1 and not _cp_matters(ev):
        strict = [s for s in strict if s.cp == 1]
        relaxed = [s for s in relaxed if s.cp == 1]
        notes.append(
            "CP > 1 was not searched: trading a factor 2 of DP for CP left the estimate "
            "byte-identical, so CP cannot beat the same ranks spent on DP in this ledger"
        )
    first = search_min(ev, strict, max_gpus, node_cost, lambda o: o.fits_high)
    low = search_min(ev, strict, max_gpus, node_cost, lambda o: o.fits_low, start=first)
    start = Found(first.outcome, first.outcome.layout.world_size) if first else None
    arith = search_min(
        ev,
        relaxed,
        max_gpus,
        exact,
        lambda o: o.fits_high,
        start=start,
    )
    arith_c = _arith_count(arith, g) if arith else _none_fits(ev, max_gpus, "high")
    first_c = _first_count(first, g, rounding) if first else _none_fits(ev, max_gpus, "high")
    low_c = (
        Count(
            low.cost,
            low.outcome.layout,
            low.outcome,
            f"{low.outcome.layout.label()} fits by the low estimate "
            f"{fmt_bytes(low.outcome.low)} on {low.cost} GPUs",
        )
        if low
        else _none_fits(ev, max_gpus, "low")
    )
    straddles = bool(low and first and low.cost < first.cost)
    alternatives, rejected = _alternatives(ev, first, max_gpus, prefs)
    return GpuCounts(
        arithmetic_min=arith_c,
        first_layout=first_c,
        validation_low=low_c,
        validation_high=first_c,
        straddles=straddles,
        validation_reason=_validation_words(low, first),
        alternatives=alternatives,
        rejected=rejected,
        gpus_per_node=g,
        rounding=rounding,
        max_gpus=max_gpus,
        limit_bytes=plan.hbm_limit_bytes,
        capacity_bytes=plan.hardware.capacity_bytes,
        estimates=ev.calls,
        notes=tuple(notes),
    )


def _cp_matters(ev: Evaluator) -> bool:
    """Whether CP changes the estimate differently from DP, observed at one point.

    Compares TP1 PP1 CP1 EP1 DP2 with TP1 PP1 CP2 EP1 DP1: both shard the dense states
    over 2 ranks; they differ only in what CP splits (the sequence's activations). If
    the ledger counts nothing that CP splits, the two estimates are byte-identical and
    every CP > 1 layout is matched by the same ranks spent on DP.
    """
    plan = ev.plan
    a, b = (
        check(plan, 1, 1, 1, 1, 2, LayoutPreferences()),
        check(plan, 1, 1, 2, 1, 1, LayoutPreferences()),
    )
    if not (isinstance(a, Layout) and isinstance(b, Layout)):
        return True
    oa, ob = ev(a), ev(b)
    return not (oa.ok and ob.ok and (oa.low, oa.high) == (ob.low, ob.high))


def _arith_count(found: Found, g: int) -> Count:
    o = found.outcome
    w = o.layout.world_size
    nodes = -(-w // g)
    return Count(
        w,
        o.layout,
        o,
        f"{w} ranks ({o.layout.label()}) is the smallest rank count whose {_words(o)}, "
        f"ignoring node boundaries and TP topology (rounded up: {nodes} node(s) of {g}); "
        f"every smaller count's high estimate exceeds the limit or cannot be laid out",
    )


def _first_count(found: Found, g: int, rounding: str) -> Count:
    o = found.outcome
    w = o.layout.world_size
    paid = (
        f"{found.cost // g} node(s) × {g} GPUs = {found.cost} GPUs"
        if rounding == "node"
        else f"{found.cost} GPUs (policy rounds to GPUs)"
    )
    idle = f", {found.cost - w} of them idle unless DP grows" if found.cost > w else ""
    return Count(
        found.cost,
        o.layout,
        o,
        f"{o.layout.label()} on {w} ranks is the first legal layout (TP inside a node, "
        f"power-of-two TP, whole heads, layers, sequence and experts, reachable batch) "
        f"whose {_words(o)}; procure {paid}{idle}",
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


def _alternatives(
    ev: Evaluator, first: Found | None, max_gpus: int, prefs: LayoutPreferences
) -> tuple[tuple[Outcome, ...], tuple[Rejected, ...]]:
    """Fitting layouts of the procurement size by headroom, and the rejected ones."""
    if first is None:
        return (), ()
    size = min(first.cost, max_gpus)
    lattice = enumerate_layouts(ev.plan, size, prefs)
    outs = [ev(lay) for lay in lattice.legal[:ALTERNATIVES_EVALUATED]]
    chosen = first.outcome.layout
    fitting = [o for o in outs if o.fits_high and o.layout != chosen]
    fitting.sort(key=lambda o: (-o.headroom, o.layout.preference()))
    failed = [Rejected(o.layout, (f"estimate refused it: {o.error}",)) for o in outs if not o.ok]
    return tuple(fitting[:ALTERNATIVES_SHOWN]), (*lattice.rejected, *failed)
