"""A shape's kernel: the parts that read TP, PP, CP, micro-batch and accumulation, worked
out once per shape, and the shard-group parts' forms and live moments.

For the spike the shape part is taken from the ledger's own numbers at one reference
shard group (DP 2): a stage's allocated sum at each moment less the rows the kernel
recomputes per N (:data:`PART_FORMS`). Every other row is checked not to read N by the
comparison with ``estimate()`` on random layouts: a row that did would show there as a
mismatch at every other DP. Landing it, the shape part would come from the same part
functions the rows are built from (no estimate per shape).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from engine.estimate import Estimate, estimate
from engine.layout.point import Layout
from engine.layout.shapes import with_layout
from engine.ledger.held import HeldTensor
from engine.ledger.peaks.runtime import stuck_bytes
from engine.ledger.phases import live_positions
from engine.ledger.precision import DTYPE_BYTES, resolve_formats
from engine.ledger.row import MOMENTS, Row
from engine.ledger.states.persistent import stage_held
from engine.plan import Plan
from engine.stacks.defaults import resolved
from tests.spike_sizing.classes import IntArray, tensor_classes
from tests.spike_sizing.kernel import Form, PaddedUnit, Part, Sharded, StageKernel, compile_stage

REF_DP = 2
"""The reference shard group's DP: sharded (N ≥ 2), so every FSDP2 row exists."""

PART_FORMS: dict[str, Form | str] = {
    "hbm.weights": Sharded("count", "param_b", False),
    "hbm.grads": Sharded("count", "grad_b", True),
    "hbm.optimizer.exp_avg": Sharded("count", "state_b", True),
    "hbm.optimizer.exp_avg_sq": Sharded("count", "state_b", True),
    "hbm.optimizer_step.temporaries": Sharded("count", "state_b", True),
    "hbm.grads.before_first_layer": Sharded("before_first", "grad_b", True),
    "hbm.grads.last_layer": Sharded("last", "grad_b", True),
    # FSDP2 all-gathers in MixedPrecisionPolicy.param_dtype (the compute dtype) and
    # reduce-scatters in its reduce_dtype (torch _fsdp_param.py, _fsdp_collectives.py)
    "hbm.gathered.all_gather_buffer": "compute",
    "hbm.buckets.reduce_scatter": "reduce",
}
"""The rows the kernel recomputes per shard group, and how (None: a padded unit in the
row's own dtype). Found by estimating one shape at several DPs and listing the rows that
changed (allocated rows only; the runtime's NCCL row changes at N = 1 only). A string
names the dtype of a padded unit: the plan's compute or reduce dtype."""


@dataclass(frozen=True)
class ShapeKernel:
    """Every decisive stage's kernel of one shape, and the fit's fixed inputs."""

    layout: Layout  # at REF_DP
    stages: tuple[int, ...]
    kernels: tuple[StageKernel, ...]
    inside: tuple[tuple[int, int], ...]  # fit peak less allocated peak less stuck reserve
    reserve: tuple[object, ...]  # each stage's ReserveModel
    accumulating: bool


def layer_units(held: Iterable[HeldTensor]) -> tuple[tuple[IntArray, IntArray], ...]:
    by_unit: dict[str, list[tuple[int, int]]] = {}
    for t in held:
        if t.unit.startswith("layer.") and t.shape and t.shape[0]:
            by_unit.setdefault(t.unit, []).append((t.shape[0], t.numel // t.shape[0]))
    distinct = {tuple(sorted(v)) for v in by_unit.values()}
    return tuple(
        (np.array([a for a, _ in u], dtype=np.int64), np.array([b for _, b in u], dtype=np.int64))
        for u in sorted(distinct)
    )


def live_of(row: Row, accumulating: bool) -> IntArray:
    out = np.zeros(len(MOMENTS), dtype=np.int64)
    for i in live_positions(row.moments, row.accumulated_moments, accumulating):
        out[i] = 1
    return out


def unsharded(layout: Layout) -> bool:
    """FSDP2 at a shard group of one rank (DP × CP = 1): the ledger's rows differ there
    beyond the shard-group parts (no sharded units to gather, one communicator fewer), so
    the spike takes that layout as a shape of its own, referenced at DP 1."""
    return layout.dp * layout.cp == 1


def shape_kernel(plan: Plan, layout: Layout) -> ShapeKernel:
    """The kernel of ``layout``'s shape (its DP ignored), from one decisive estimate at
    :data:`REF_DP` (at DP 1 for an :func:`unsharded` layout). Raises
    :class:`~engine.errors.PlanError` where the shape cannot run."""
    ref_dp = 1 if unsharded(layout) else REF_DP
    ref = Layout(
        layout.tp, layout.pp, layout.cp, layout.ep, ref_dp,
        layout.micro_batch, layout.grad_accum, layout.etp, layout.pp_split,
    )  # fmt: skip
    laid = with_layout(plan, ref)
    est: Estimate = estimate(laid, decisive_only=True)
    r = resolved(laid)
    gran = r.runtime.allocation_granularity_bytes
    tied = r.model.architecture.tied_embeddings
    acc = r.batch.grad_accum > 1
    formats = resolve_formats(r.method.precision)
    dtypes = {"compute": r.method.precision.compute_dtype, "reduce": formats.reduce}
    kernels, inside, reserve = [], [], []
    for st in est.stages:
        t = st.totals
        lows, highs = np.array(t.lows, dtype=np.int64), np.array(t.highs, dtype=np.int64)
        held, _ctx = stage_held(r, st.stage)
        parts = []
        for row in st.rows:
            if row.id not in PART_FORMS or not row.allocated:
                continue
            live = live_of(row, acc)
            lows -= row.low * live
            highs -= row.high * live
            form = PART_FORMS[row.id]
            if isinstance(form, str):
                form = PaddedUnit(DTYPE_BYTES[dtypes[form]])
            parts.append(Part(row.id, form, live))
        classes, units = tensor_classes(held, tied), layer_units(held)
        kernels.append(compile_stage(lows, highs, classes, units, tuple(parts), gran))
        peak = t.peak
        s_low, s_high = stuck_bytes(t.reserve, peak.low, peak.high, t.steady)
        fit = t.fit_peak
        inside.append((fit.low - peak.low - s_low, fit.high - peak.high - s_high))
        reserve.append(t.reserve)
    return ShapeKernel(
        ref,
        tuple(st.stage for st in est.stages),
        tuple(kernels),
        tuple(inside),
        tuple(reserve),
        acc,
    )
