"""The alternatives a count shows beside its layout: the other fitting layouts of the
procurement size, ranked by headroom, and the rejected ones with their reasons."""

from __future__ import annotations

from engine.layout.lattice.shapes import LayoutPreferences, Rejected, enumerate_layouts
from engine.layout.proofs.evaluate import Evaluator, Outcome
from engine.layout.search.minimum import Found
from engine.units import fmt_bytes

ALTERNATIVES_SHOWN, ALTERNATIVES_EVALUATED = 5, 16
"""Fitting layouts shown, and legal layouts of the procurement size estimated for them in
preference order (the lattice of a large world can hold hundreds)."""


def ranked_alternatives(
    ev: Evaluator, first: Found | None, max_gpus: int, prefs: LayoutPreferences
) -> tuple[tuple[Outcome, ...], tuple[Rejected, ...]]:
    """Fitting layouts of the procurement size by headroom, and the rejected ones: the
    high estimate alone ranks them, so a layout whose peak floor is over the limit
    (:mod:`engine.layout.proofs.bound`) is not estimated."""
    if first is None:
        return (), ()
    size = min(first.cost, max_gpus)
    lattice = enumerate_layouts(ev.plan, size, prefs)
    floors, limit = ev.floors, ev.plan.hbm_limit_bytes  # over its peak floor: no fit
    legal = lattice.legal[:ALTERNATIVES_EVALUATED]
    floored = [x for x in legal if floors is not None and floors.over(x, limit)]
    outs = [ev(x) for x in legal if x not in floored]
    chosen = first.outcome.layout
    fitting = [o for o in outs if o.fits_high and o.layout != chosen]
    fitting.sort(key=lambda o: (-o.headroom, o.layout.preference()))
    failed = [Rejected(o.layout, (f"estimate refused it: {o.error}",)) for o in outs if not o.ok]
    # "why doesn't it fit": the legal layouts of this size that memory rules out
    over = [Rejected(o.layout, memory_words(o)) for o in outs if o.ok and not o.fits_high]
    over += [
        Rejected(x, (f"memory: its peak floor alone exceeds the limit {fmt_bytes(limit)}",))
        for x in floored
    ]
    return tuple(fitting[:ALTERNATIVES_SHOWN]), (*lattice.rejected, *failed, *over)


def memory_words(o: Outcome) -> tuple[str, ...]:
    """Why memory rules a legal layout out: HBM per rank over the limit, or host RAM /
    NVMe per node."""
    if o.high > o.limit:  # one wording for all (a summary counts them as one kind)
        return (f"memory: the high estimate per rank exceeds the limit {fmt_bytes(o.limit)}",)
    return tuple(f"memory: {p}" for p in o.node_problems)
