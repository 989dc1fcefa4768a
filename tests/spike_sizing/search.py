"""One of the three counts as a table search, to time the search the issue asks for:
the first practical layout's GPU count (``engine/layout/counts.py`` count 2: the
fewest GPUs bought — :func:`~engine.layout.point.procurement` — over the legal
layouts whose fit peak's *high* fits the limit).

Enumerate the legal shapes (:func:`~engine.layout.shapes.legal_shapes`) and each
shape's DPs (:func:`~engine.layout.candidates.dp_candidates`); give every shape a
*state floor* — the smallest world at which the persistent model states alone
(weights, both AdamW moments: sharded terms of the cached classes, no estimate) fit —
and visit shapes by that floor, building a shape's parts (the numbers-only reference
estimate, :mod:`tests.spike_sizing.numbers`) only while its floor can still beat the
settled count. The floor is checked, not assumed: every evaluated layout's fit low
(the largest low of any stage, so at least stage 0's steady low) must be at least its
floor (:attr:`Found.floor_violations`). Stage 0's states, not the heaviest stage's:
under PP16 the heaviest by fit is a middle stage holding fewer states than stage 0.

Not carried (the search's, not the table's): the padding-share preference, the plan's
own layout winning ties, alternatives, rejections and "closest"; counts 1 and 3.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from engine.layout.candidates import dp_candidates
from engine.layout.point import Layout, LayoutPreferences, batch_for, procurement
from engine.layout.shapes import legal_shapes, with_layout
from engine.ledger.states.persistent import stage_held
from engine.plan import Plan
from engine.stacks.defaults import resolved
from tests.spike_sizing.classes import IntArray, tensor_classes
from tests.spike_sizing.kernel import Sharded, sharded_bytes
from tests.spike_sizing.numbers import Caches, shape_kernel_numbers
from tests.spike_sizing.table import table

STATES = (
    Sharded("count", "param_b", False),  # hbm.weights
    Sharded("count", "state_b", True),  # hbm.optimizer.exp_avg
    Sharded("count", "state_b", True),  # hbm.optimizer.exp_avg_sq
)
"""The rows every moment holds under FSDP2 + AdamW (the gradients are not among them:
``zero_grad(set_to_none=True)`` frees them between steps)."""


@dataclass
class Found:
    gpus: int  # procurement count of the first fitting layout, 0 if none
    world: int
    shapes: int  # legal shapes
    evaluated: int  # shapes whose parts were built
    layouts: int  # layouts in the evaluated tables
    floor_violations: int
    lattice_s: float  # legal shapes, their DPs, the state floors
    parts_s: float  # shape parts of the evaluated shapes
    tables_s: float


def _floor(
    plan: Plan, shape_tp: int, pp: int, split: tuple[int, ...] | None, n: IntArray
) -> IntArray:
    """Stage 0's persistent states per rank for every shard group in ``n``."""
    lay = Layout(shape_tp, pp, 1, 1, 1, plan.batch.micro_batch, plan.batch.grad_accum, 1, split)
    r = resolved(with_layout(plan, lay))
    held, _ctx = stage_held(r, 0)
    c = tensor_classes(held, r.model.architecture.tied_embeddings)
    gran = r.runtime.allocation_granularity_bytes
    out: IntArray = sum((sharded_bytes(c, f, n, gran) for f in STATES), np.zeros_like(n))
    return out


def first_practical(plan: Plan, max_world: int, caches: Caches) -> Found:
    """The table search for count 2 (see the module's docstring)."""
    t0 = time.perf_counter()
    prefs = LayoutPreferences()
    limit, per_node = plan.hbm_limit_bytes, plan.hardware.gpus_per_node
    rounding = plan.policy.rounding
    shapes = legal_shapes(plan, max_world, prefs)
    floors: dict[tuple[object, ...], IntArray] = {}
    queue = []
    for s in shapes:
        dps = np.array(
            dp_candidates(plan, s, max_world // (s.tp * s.pp * s.cp), prefs.pipeline_full),
            dtype=np.int64,
        )
        if not dps.size:
            continue
        key = (s.tp, s.pp, s.pp_split)
        n = dps * s.cp
        if key not in floors:  # by placement; the floor is per shard group N
            every = np.arange(1, max_world + 1, dtype=np.int64)
            floors[key] = _floor(plan, s.tp, s.pp, s.pp_split, every)
        floor = floors[key][n - 1]
        ok = dps[floor <= limit]
        if ok.size:
            queue.append((int(ok[0]) * s.tp * s.pp * s.cp, s, dps, floors[key]))
    queue.sort(key=lambda q: q[0])
    lattice_s, parts_s, tables_s = time.perf_counter() - t0, 0.0, 0.0
    best, best_world, evaluated, layouts, bad = 0, 0, 0, 0, 0
    for floor_world, s, dps, floor_of in queue:
        if best and procurement(floor_world, per_node, rounding) > best:
            break
        evaluated += 1
        lay0 = s.at_dp(int(dps[0]), *_batch(plan, int(dps[0]), s.pp))
        t1 = time.perf_counter()
        sk = shape_kernel_numbers(plan, lay0, caches)
        t2 = time.perf_counter()
        tab = table(sk, dps)
        parts_s, tables_s = parts_s + t2 - t1, tables_s + time.perf_counter() - t2
        layouts += int(dps.size)
        bad += int((tab.fit_low < floor_of[dps * s.cp - 1]).sum())
        fits = dps[tab.fit_high <= limit]
        if fits.size:
            world = int(fits[0]) * s.tp * s.pp * s.cp
            gpus = procurement(world, per_node, rounding)
            if not best or gpus < best:
                best, best_world = gpus, world
    return Found(
        best, best_world, len(shapes), evaluated, layouts, bad, lattice_s, parts_s, tables_s
    )


def _batch(plan: Plan, dp: int, pp: int) -> tuple[int, int]:
    got = batch_for(plan, dp, pp)
    assert isinstance(got, tuple)
    return got[0], got[1]
