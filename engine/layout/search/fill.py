"""A procurement layout that uses every GPU bought, when one fits.

The search ranks layouts by what they cost (GPUs paid for) and, among equal costs, by
preference — least model parallelism first — so a 12-rank layout on two 8-GPU nodes is
as good to it as a 16-rank one, and it picks the 12 with 4 GPUs idle. A buyer pays for
16: when a layout of exactly the bought size fits by the high estimate it is the one to
run (more DP or model parallelism leaves more room per rank). The count is unchanged —
both cost the same — so the counts still equal brute force (tests/engine/layout/
test_search_exact.py); only the layout behind it changes, and the plan's own layout
still wins (it is on screen, and it fits).
"""

from __future__ import annotations

from engine.layout.lattice.batch import target_global_batch
from engine.layout.lattice.shapes import LayoutPreferences, enumerate_layouts, layout_of
from engine.layout.proofs.evaluate import Evaluator
from engine.layout.search.alternatives import ALTERNATIVES_EVALUATED
from engine.layout.search.minimum import Found


def fill_bought(ev: Evaluator, found: Found | None, prefs: LayoutPreferences) -> Found | None:
    """``found`` with a layout of exactly the bought size when one fits (those that keep
    the plan's global batch first, then in preference order), else ``found``."""
    if found is None or found.outcome.layout.world_size >= found.cost:
        return found
    plan = ev.plan
    if found.outcome.layout == layout_of(plan):
        return found
    target = target_global_batch(plan)
    legal = enumerate_layouts(plan, found.cost, prefs).legal[:ALTERNATIVES_EVALUATED]
    floors, limit = ev.floors, plan.hbm_limit_bytes
    ranked = sorted(legal, key=lambda lay: lay.global_batch != target)  # stable: prefs
    for lay in ranked:
        if floors is not None and floors.over(lay, limit):
            continue
        o = ev(lay)
        if o.fits_high:
            return Found(o, found.cost)
    return found
