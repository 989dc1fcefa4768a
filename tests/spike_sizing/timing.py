"""Timings of the kernel as a table: every candidate of one world size, and every
candidate of every world size up to 16,384, each split into legality (the lattice's),
shape parts (one decisive estimate per shape in the spike) and the vectorised table."""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from engine.layout.candidates import dp_candidates, layout_at
from engine.layout.point import Layout, LayoutPreferences
from engine.layout.shapes import enumerate_layouts, legal_shapes
from engine.plan import Plan
from tests.spike_sizing.numbers import Caches, shape_kernel_numbers
from tests.spike_sizing.shape import ShapeKernel, shape_kernel
from tests.spike_sizing.table import table


@dataclass
class Timed:
    layouts: int
    shapes: int
    legality_s: float
    shapes_s: float  # shape parts, cold (nothing cached by this module)
    table_s: float  # the vectorised tables, shape parts ready


def _tables(
    plan: Plan, groups: dict[tuple[object, ...], list[Layout]], caches: Caches | None
) -> tuple[float, float]:
    t0 = time.perf_counter()
    kernels: dict[tuple[object, ...], ShapeKernel] = {
        k: shape_kernel(plan, lays[0])
        if caches is None
        else shape_kernel_numbers(plan, lays[0], caches)
        for k, lays in groups.items()
    }
    t1 = time.perf_counter()
    for k, lays in groups.items():
        table(kernels[k], np.array([lay.dp for lay in lays], dtype=np.int64))
    return t1 - t0, time.perf_counter() - t1


def _group(lays: list[Layout]) -> dict[tuple[object, ...], list[Layout]]:
    groups: dict[tuple[object, ...], list[Layout]] = defaultdict(list)
    for lay in lays:
        groups[(lay.tp, lay.pp, lay.cp, lay.micro_batch, lay.grad_accum, lay.pp_split)].append(lay)
    return groups


def one_world(plan: Plan, world: int, caches: Caches | None = None) -> Timed:
    """Every legal layout of one world size; shape parts by rows (``caches`` None: the
    first pass) or numbers only (:mod:`tests.spike_sizing.numbers`)."""
    t = time.perf_counter()
    legal = list(enumerate_layouts(plan, world).legal)
    legality = time.perf_counter() - t
    groups = _group(legal)
    shapes_s, table_s = _tables(plan, groups, caches)
    return Timed(len(legal), len(groups), legality, shapes_s, table_s)


def every_world(plan: Plan, max_world: int, caches: Caches | None = None) -> Timed:
    """The search's own candidates: every legal shape (:func:`legal_shapes`) at every DP
    its rules allow within ``max_world`` (:func:`dp_candidates`, :func:`layout_at`; the
    padding-share preference, which the search applies per layout, not applied)."""
    prefs = LayoutPreferences()
    t = time.perf_counter()
    legal: list[Layout] = []
    for s in legal_shapes(plan, max_world, prefs):
        top = max_world // (s.tp * s.pp * s.cp)
        for dp in dp_candidates(plan, s, top, prefs.pipeline_full):
            legal.append(layout_at(plan, s, dp))
    legality = time.perf_counter() - t
    groups = _group(legal)
    shapes_s, table_s = _tables(plan, groups, caches)
    return Timed(len(legal), len(groups), legality, shapes_s, table_s)
