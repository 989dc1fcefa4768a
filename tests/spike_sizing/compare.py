"""The kernel's table against ``estimate()`` of the plan laid out the same way, layout by
layout: the heaviest rank's allocated peak, its persistent part (the steady moment),
every moment's sum, the fit peak and the heaviest stage."""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np

from engine.estimate import estimate
from engine.layout.point import Layout
from engine.layout.shapes import with_layout
from engine.plan import Plan
from tests.spike_sizing.numbers import Caches, shape_kernel_numbers
from tests.spike_sizing.shape import PART_FORMS, ShapeKernel, shape_kernel, unsharded
from tests.spike_sizing.table import Table, table

METRICS = ("peak", "steady", "moments", "fit", "heaviest")
ShapeKey = tuple[int, int, int, int, int, int, tuple[int, ...] | None, bool]


def shape_key(v: int, lay: Layout) -> ShapeKey:
    return (
        v, lay.tp, lay.pp, lay.cp, lay.micro_batch, lay.grad_accum, lay.pp_split,
        unsharded(lay),
    )  # fmt: skip


@dataclass
class Report:
    layouts: int = 0
    shapes: int = 0
    exact: Counter[str] = field(default_factory=Counter)
    max_abs: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    max_rel: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    unsharded: int = 0  # layouts of shard group 1 (DP × CP = 1)
    unsharded_exact: int = 0  # of those, exact in every metric
    at_reference: int = 0  # at their shape's reference DP: exact by construction
    at_reference_exact: int = 0
    missed_rows: Counter[str] = field(default_factory=Counter)
    estimate_s: list[float] = field(default_factory=list)
    shape_s: list[float] = field(default_factory=list)
    table_s: float = 0.0

    def note(self, metric: str, got: int, want: int) -> bool:
        d = abs(got - want)
        self.max_abs[metric] = max(self.max_abs[metric], d)
        if want:
            self.max_rel[metric] = max(self.max_rel[metric], d / abs(want))
        return d == 0


def _missed(plan: Plan, sk: ShapeKernel, lay: Layout) -> set[str]:
    """Rows of the heaviest stage that are not kernel parts and differ from the
    reference shard group's: the rows the kernel could not reproduce at ``lay``."""
    ref = estimate(with_layout(plan, sk.layout)).heaviest.rows
    got = estimate(with_layout(plan, lay)).heaviest.rows
    a = {r.id: (r.low, r.high, r.moments) for r in ref if r.id not in PART_FORMS}
    b = {r.id: (r.low, r.high, r.moments) for r in got if r.id not in PART_FORMS}
    return {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}


def compare(
    plans: list[Plan], drawn: list[tuple[int, Layout]], caches: Caches | None = None
) -> Report:
    """Every drawn layout against ``estimate()``; shape parts by rows (``caches`` None)
    or numbers only (:func:`~tests.spike_sizing.numbers.shape_kernel_numbers`)."""
    rep = Report(layouts=len(drawn))
    by_shape: dict[ShapeKey, list[Layout]] = defaultdict(list)
    for v, lay in drawn:
        by_shape[shape_key(v, lay)].append(lay)
    rep.shapes = len(by_shape)
    for key, lays in by_shape.items():
        plan = plans[key[0]]
        t0 = time.perf_counter()
        sk = (
            shape_kernel(plan, lays[0])
            if caches is None
            else shape_kernel_numbers(plan, lays[0], caches)
        )
        t1 = time.perf_counter()
        tab = table(sk, np.array([lay.dp for lay in lays], dtype=np.int64))
        rep.shape_s.append(t1 - t0)
        rep.table_s += time.perf_counter() - t1
        for i, lay in enumerate(lays):
            _one(rep, plan, sk, tab, i, lay)
    return rep


def _one(rep: Report, plan: Plan, sk: ShapeKernel, tab: Table, i: int, lay: Layout) -> None:
    laid = with_layout(plan, lay)
    t = time.perf_counter()
    est = estimate(laid)
    rep.estimate_s.append(time.perf_counter() - t)
    h = est.heaviest
    lows, highs = h.totals.lows, h.totals.highs
    ok = {
        "peak": rep.note("peak", int(tab.peak_high[i]), h.peak.high)
        & rep.note("peak_low", int(tab.peak_low[i]), h.peak.low),
        "steady": rep.note("steady", int(tab.steady_high[i]), highs[0])
        & rep.note("steady_low", int(tab.steady_low[i]), lows[0]),
        "moments": all(
            [rep.note("moments", int(g), w) for g, w in zip(tab.highs[i], highs, strict=True)]
            + [rep.note("moments", int(g), w) for g, w in zip(tab.lows[i], lows, strict=True)]
        ),
        "fit": rep.note("fit", int(tab.fit_high[i]), est.fit_peak.high)
        & rep.note("fit_low", int(tab.fit_low[i]), est.fit_peak.low),
        "heaviest": int(tab.heaviest[i]) == est.heaviest_stage,
    }
    for m, good in ok.items():
        rep.exact[m] += int(good)
    one, at_ref = unsharded(lay), lay.dp == sk.layout.dp
    rep.unsharded += one
    rep.at_reference += at_ref
    if all(ok.values()):
        rep.unsharded_exact += one
        rep.at_reference_exact += at_ref
        return
    missed = _missed(plan, sk, lay) if lay.dp != sk.layout.dp else set()
    for row in missed or {"(no row differs: composition)"}:
        rep.missed_rows[row] += 1
