"""A shape's kernel from the ledger's numbers alone (second pass of the spike, after
``estimate()`` became numbers-only): no row is built per shape.

The first pass (:func:`tests.spike_sizing.shape.shape_kernel`) read the shard-group
parts off the reference estimate's *rows* and each stage's classes off
:func:`~engine.ledger.states.persistent.stage_held`, per shape. Here:

- the shape part is the reference estimate's allocated sums (``StageTotals.lows`` /
  ``highs``: ``estimate()`` builds no row since the one assembly,
  ``engine/ledger/stage_rows.py``) less the kernel's *own* shard-group parts at the
  reference group N_ref — so the table equals the ledger at N_ref by construction and
  every other N tests the shard-group arithmetic, as before;
- the parts' live moments are read off the rows once per :func:`_mask_key` (batch
  accumulating or not, PP, the stage, shard group one or not) — what a landed kernel
  would carry as constants beside each part;
- the classes and layer units once per placement (TP, PP, split, stage: not DP, CP or
  the batch), as the design note proposes (``classes(plan, stage)`` cached per
  placement), and the terms folded from them once per placement and mask key.

What is left per shape is the one decisive reference estimate (numbers), the fold of
the cached classes into terms, and one table evaluation at N_ref: :class:`Clock` splits
the time so.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np

from engine.estimate import estimate
from engine.layout.point import Layout
from engine.layout.shapes import with_layout
from engine.ledger.peaks.runtime import stuck_bytes
from engine.ledger.precision import DTYPE_BYTES, resolve_formats
from engine.ledger.stage_rows import stage_rows
from engine.ledger.states.persistent import stage_held
from engine.plan import Plan
from engine.stacks.defaults import resolved
from tests.spike_sizing.classes import Classes, IntArray, tensor_classes
from tests.spike_sizing.kernel import PaddedUnit, Part, StageKernel, compile_stage, moment_bytes
from tests.spike_sizing.shape import (
    PART_FORMS,
    REF_DP,
    ShapeKernel,
    layer_units,
    live_of,
    unsharded,
)

Units = tuple[tuple[IntArray, IntArray], ...]
MaskKey = tuple[bool, int, int, bool]


@dataclass
class Clock:
    """Where a numbers-only shape part's time goes (seconds, summed over shapes)."""

    estimate_s: float = 0.0  # the decisive reference estimate (numbers only)
    masks_s: float = 0.0  # live moments of the parts (rows, once per mask key)
    classes_s: float = 0.0  # held tensors → classes and units (once per placement)
    fold_s: float = 0.0  # compile the terms, subtract the parts at N_ref
    shapes: int = 0
    per_shape_s: list[float] = field(default_factory=list)


@dataclass
class Caches:
    """What a landed kernel would keep across shapes (and clear with the engine's)."""

    masks: dict[MaskKey, tuple[tuple[str, IntArray], ...]] = field(default_factory=dict)
    classes: dict[tuple[object, ...], tuple[Classes, Units]] = field(default_factory=dict)
    folded: dict[tuple[object, ...], StageKernel] = field(default_factory=dict)  # zero base
    clock: Clock = field(default_factory=Clock)


def _mask_key(laid: Plan, layout: Layout, stage: int) -> MaskKey:
    return (laid.batch.grad_accum > 1, layout.pp, stage, unsharded(layout))


def _masks(laid: Plan, stage: int, acc: bool) -> tuple[tuple[str, IntArray], ...]:
    """Each shard-group part's live moments at ``stage`` (0/1 per moment), in row order;
    only allocated rows, as :func:`~tests.spike_sizing.shape.shape_kernel` takes them."""
    return tuple(
        (row.id, live_of(row, acc))
        for row in stage_rows(resolved(laid), stage)
        if row.id in PART_FORMS and row.allocated
    )


def shape_kernel_numbers(plan: Plan, layout: Layout, caches: Caches) -> ShapeKernel:
    """:func:`~tests.spike_sizing.shape.shape_kernel` without building rows per shape."""
    t0 = time.perf_counter()
    clock = caches.clock
    ref_dp = 1 if unsharded(layout) else REF_DP
    ref = Layout(
        layout.tp, layout.pp, layout.cp, layout.ep, ref_dp,
        layout.micro_batch, layout.grad_accum, layout.etp, layout.pp_split,
    )  # fmt: skip
    laid = with_layout(plan, ref)
    est = estimate(laid, decisive_only=True)
    t1 = time.perf_counter()
    clock.estimate_s += t1 - t0
    r = resolved(laid)
    gran = r.runtime.allocation_granularity_bytes
    tied = r.model.architecture.tied_embeddings
    acc = r.batch.grad_accum > 1
    dtypes = {
        "compute": r.method.precision.compute_dtype,
        "reduce": resolve_formats(r.method.precision).reduce,
    }
    n_ref = np.array([ref_dp * ref.cp], dtype=np.int64)
    kernels, inside, reserve = [], [], []
    for st in est.stages:
        ta = time.perf_counter()
        mkey = _mask_key(laid, ref, st.stage)
        masks = caches.masks.get(mkey)
        if masks is None:
            masks = caches.masks[mkey] = _masks(laid, st.stage, acc)
        tb = time.perf_counter()
        ckey = (ref.tp, ref.pp, ref.pp_split, st.stage)
        got = caches.classes.get(ckey)
        if got is None:
            held, _ctx = stage_held(r, st.stage)
            got = caches.classes[ckey] = (tensor_classes(held, tied), layer_units(held))
        tc = time.perf_counter()
        fkey = (ckey, mkey, gran, dtypes["compute"], dtypes["reduce"])
        zero_k = caches.folded.get(fkey)
        if zero_k is None:
            parts = []
            for row_id, live in masks:
                form = PART_FORMS[row_id]
                if isinstance(form, str):
                    form = PaddedUnit(DTYPE_BYTES[dtypes[form]])
                parts.append(Part(row_id, form, live))
            zero = np.zeros(len(st.totals.lows), dtype=np.int64)
            zero_k = compile_stage(zero, zero, got[0], got[1], tuple(parts), gran)
            caches.folded[fkey] = zero_k
        t = st.totals
        at_ref, _ = moment_bytes(zero_k, n_ref)  # shard-group parts are exact: low = high
        kernels.append(
            replace(
                zero_k,
                base_low=np.array(t.lows, dtype=np.int64) - at_ref[0],
                base_high=np.array(t.highs, dtype=np.int64) - at_ref[0],
            )
        )
        peak, fit = t.peak, t.fit_peak
        s_low, s_high = stuck_bytes(t.reserve, peak.low, peak.high, t.steady)
        inside.append((fit.low - peak.low - s_low, fit.high - peak.high - s_high))
        reserve.append(t.reserve)
        td = time.perf_counter()
        clock.masks_s += tb - ta
        clock.classes_s += tc - tb
        clock.fold_s += td - tc
    clock.shapes += 1
    clock.per_shape_s.append(time.perf_counter() - t0)
    return ShapeKernel(
        ref,
        tuple(st.stage for st in est.stages),
        tuple(kernels),
        tuple(inside),
        tuple(reserve),
        acc,
    )
