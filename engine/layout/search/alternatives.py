"""The layouts of the procurement size beside a count: the one to run when the count's
layout leaves GPUs idle (:func:`fill_bought`), the other fitting layouts ranked by
headroom and the rejected ones with their reasons (:func:`ranked_alternatives`). Both
estimate at most :data:`ALTERNATIVES_EVALUATED` legal layouts, in preference order, and
none whose peak floor is over the limit (:mod:`engine.layout.proofs.bound`)."""

from __future__ import annotations

from engine.layout.lattice.batch import target_global_batch
from engine.layout.lattice.point import Layout
from engine.layout.lattice.shapes import (
    Lattice,
    LayoutPreferences,
    Rejected,
    enumerate_layouts,
    layout_of,
)
from engine.layout.proofs.evaluate import Evaluator, Outcome
from engine.layout.search.minimum import Found
from engine.units import fmt_bytes

ALTERNATIVES_SHOWN, ALTERNATIVES_EVALUATED = 5, 16
"""Fitting layouts shown, and legal layouts of the procurement size estimated for them in
preference order (the lattice of a large world can hold hundreds)."""


def _sized(
    ev: Evaluator, size: int, prefs: LayoutPreferences
) -> tuple[Lattice, tuple[Layout, ...], list[Layout]]:
    """The lattice of ``size``, its first :data:`ALTERNATIVES_EVALUATED` legal layouts,
    and those of them whose peak floor alone is over the limit (no fit, no estimate)."""
    lattice = enumerate_layouts(ev.plan, size, prefs)
    floors, limit = ev.floors, ev.plan.hbm_limit_bytes
    legal = lattice.legal[:ALTERNATIVES_EVALUATED]
    return lattice, legal, [x for x in legal if floors is not None and floors.over(x, limit)]


def fill_bought(ev: Evaluator, found: Found | None, prefs: LayoutPreferences) -> Found | None:
    """``found`` with a layout of exactly the bought size when one fits (those that keep
    the plan's global batch first, then in preference order), else ``found``.

    The search ranks layouts by cost (GPUs paid for), then preference, so a 12-rank
    layout on two 8-GPU nodes is as good to it as a 16-rank one; a buyer pays for 16, and
    a fitting layout of all 16 leaves more room per rank. The count is unchanged (both
    cost the same), so the counts still equal brute force (``test_search_exact.py``);
    only the layout behind it changes, and the plan's own layout still wins."""
    if found is None or found.outcome.layout.world_size >= found.cost:
        return found
    if found.outcome.layout == layout_of(ev.plan):
        return found
    target = target_global_batch(ev.plan)
    _, legal, floored = _sized(ev, found.cost, prefs)
    ranked = sorted(legal, key=lambda lay: lay.global_batch != target)  # stable: prefs
    for lay in ranked:
        if lay not in floored and (o := ev(lay)).fits_high:
            return Found(o, found.cost)
    return found


def ranked_alternatives(
    ev: Evaluator, first: Found | None, max_gpus: int, prefs: LayoutPreferences
) -> tuple[tuple[Outcome, ...], tuple[Rejected, ...]]:
    """Fitting layouts of the procurement size by headroom, and the rejected ones: the
    high estimate alone ranks them."""
    if first is None:
        return (), ()
    lattice, legal, floored = _sized(ev, min(first.cost, max_gpus), prefs)
    outs = [ev(x) for x in legal if x not in floored]
    chosen = first.outcome.layout
    fitting = [o for o in outs if o.fits_high and o.layout != chosen]
    fitting.sort(key=lambda o: (-o.headroom, o.layout.preference()))
    failed = [Rejected(o.layout, (f"estimate refused it: {o.error}",)) for o in outs if not o.ok]
    # "why doesn't it fit": the legal layouts of this size that memory rules out
    over = [Rejected(o.layout, memory_words(o)) for o in outs if o.ok and not o.fits_high]
    limit = fmt_bytes(ev.plan.hbm_limit_bytes)
    over += [
        Rejected(x, (f"memory: its peak floor alone exceeds the limit {limit}",)) for x in floored
    ]
    return tuple(fitting[:ALTERNATIVES_SHOWN]), (*lattice.rejected, *failed, *over)


def memory_words(o: Outcome) -> tuple[str, ...]:
    """Why memory rules a legal layout out: HBM per rank over the limit, or host RAM /
    NVMe per node."""
    if o.high > o.limit:  # one wording for all (a summary counts them as one kind)
        return (f"memory: the high estimate per rank exceeds the limit {fmt_bytes(o.limit)}",)
    return tuple(f"memory: {p}" for p in o.node_problems)
