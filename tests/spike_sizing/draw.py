"""Random legal layouts of a plan: TP, PP, CP and DP drawn, the micro-batch and
accumulation varied through the plan, each judged by the lattice's own rules
(:func:`engine.layout.shapes.check`, every rule of :mod:`engine.legality` and the
search's default preferences) and kept only when legal."""

from __future__ import annotations

import math
import random

from engine.layout.point import Layout, LayoutPreferences
from engine.layout.shapes import check
from engine.legality import rules
from engine.plan import Plan, with_values

MAX_WORLD = 16_384
BATCHES = ((1, 1), (2, 1), (4, 1), (1, 4), (2, 8))
"""(micro-batch, grad_accum) of the plan variants drawn from."""


def variants(plan: Plan) -> list[Plan]:
    """The plan at each of :data:`BATCHES`."""
    return [with_values(plan, {"batch.micro_batch": m, "batch.grad_accum": g}) for m, g in BATCHES]


def draw_layouts(plan: Plan, n: int, seed: int = 34) -> list[tuple[int, Layout]]:
    """``n`` legal layouts as (variant index, layout), world ≤ :data:`MAX_WORLD`; DP is
    drawn log-uniformly so small and large groups are both present."""
    rng = random.Random(seed)
    plans = variants(plan)
    arch = plan.model.architecture
    tps = rules.tp_values(arch)
    pps = list(rules.pp_values(arch.layers))
    cps = [c for c in rules.cp_values(plan.batch.seq_len) if c <= 64]
    prefs = LayoutPreferences()
    out: list[tuple[int, Layout]] = []
    while len(out) < n:
        v = rng.randrange(len(plans))
        tp, pp, cp = rng.choice(tps), rng.choice(pps), rng.choice(cps)
        room = MAX_WORLD // (tp * pp * cp)
        if room < 1:
            continue
        dp = max(1, min(room, round(math.exp(rng.uniform(0.0, math.log(room))))))
        got = check(plans[v], tp, pp, cp, 1, dp, prefs)
        if isinstance(got, Layout):
            out.append((v, got))
    return out
