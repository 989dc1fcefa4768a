"""Calibration: measured records → proposed, narrower ranges for the uncertain inputs.

Never a silent correction factor: the result is a set of explicit plan edits
``{dotted field path: new value}``, each with its before value and the evidence, which
the GUI applies through ``PlanDocument.set`` (undoable) and the CLI prints before it
writes a new file. Applying :attr:`Calibration.inverse` restores the plan exactly.

Three inputs are calibrated, each from the figure that measures it; the proposed band
is the measured spread widened by ``margin`` (a fraction, 5 % by default) each side:

- the allocator reserve from reserved and allocated: under the ``allocator`` reserve model
  ``runtime.fragmentation`` = (reserved − allocated − the side-stream cache) ÷ the
  transient allocated bytes; under ``fraction`` ``runtime.allocator_reserve`` =
  ``(max_reserved − max_allocated) / max_allocated``; band ``[min f·(1−m), max f·(1+m)]``.
- the external-memory inputs (``runtime.cuda_context_bytes``,
  ``runtime.nccl_bytes_per_communicator``) from
  ``external_bytes``: one measured number cannot split two inputs, so it fixes one
  position ``t = (E − L) / (H − L)`` inside the runtime rows' summed range ``[L, H]`` and
  every input whose row is in the estimate moves to that position in its own band
  (each runtime row is a count × its input, so the rows then sum to E).
- ``runtime.activation_band`` from the measured activations (the record's breakdown, or
  else allocated minus the other rows' mid, said so in the evidence): with the
  activation rows being ``counted × band``, ``counted = high ÷ band.high`` and the
  measured ratio is ``r = measured ÷ counted``; band ``[min r·(1−m), max r·(1+m)]``.

Trace records (``memplan trace``: a *simulated* measurement on fake tensors) hold an
allocated peak and its breakdown, but no allocator and no CUDA context or NCCL, so they
are never used for the allocator reserve or the external-memory inputs — even a
hand-edited one that carries such a figure — and are used for the activation band,
which the output says. The tracker counts the fp32 logits saved for the loss's backward
as activations, the ledger in its ``logits`` group, so a trace's activations are taken
as its activations + logits less the ledger's logits.

Fractions are rounded outwards to 4 decimals, bytes outwards to whole MiB.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.estimate import estimate
from engine.ledger.row import Role
from engine.plan import Plan, get_value
from engine.stacks.defaults import resolved
from engine.stacks.families import family_of
from engine.units import MiB
from engine.validation.identity import workload_hash
from engine.validation.reconcile import (
    estimate_by_category,
    normalise_category,
    reconcile_record,
    runtime_range,
)
from engine.validation.records import MeasuredRecord

DEFAULT_MARGIN = 0.05
FRACTION_DIGITS = 4
FRACTION_MAX = 10.0  # FractionRange's upper bound in engine/sections/base.py

RUNTIME_FIELDS: dict[str, Role] = {
    "runtime.cuda_context_bytes": "cuda_context",
    "runtime.nccl_bytes_per_communicator": "nccl_buffers",
}
"""Each external-memory input and the role of the runtime row it scales (the cuBLAS
workspaces are allocated through PyTorch's caching allocator: not external memory)."""


@dataclass(frozen=True, slots=True)
class Proposal:
    """One explicit edit: a field path, its value now and the proposed value, and why."""

    path: str
    before: Any
    after: Any
    evidence: str


@dataclass(frozen=True, slots=True)
class Calibration:
    proposals: tuple[Proposal, ...]
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = field(default=())

    @property
    def changes(self) -> dict[str, Any]:
        """``{path: new value}`` for ``engine.plan.with_values`` or ``PlanDocument.set``."""
        return {p.path: p.after for p in self.proposals}

    @property
    def inverse(self) -> dict[str, Any]:
        """``{path: value before}``: applying it after :attr:`changes` undoes them."""
        return {p.path: p.before for p in self.proposals}


def _fraction_band(low: float, high: float) -> dict[str, float]:
    scale = 10**FRACTION_DIGITS
    lo = min(FRACTION_MAX, max(0.0, math.floor(low * scale) / scale))
    hi = min(FRACTION_MAX, math.ceil(high * scale) / scale)
    return {"low": lo, "high": max(lo, hi)}


def _byte_band(low: float, high: float) -> dict[str, int]:
    lo = max(0, math.floor(low / MiB) * MiB)
    hi = max(lo, math.ceil(high / MiB) * MiB)
    return {"low": lo, "high": hi}


def _widen(values: Sequence[float], margin: float) -> tuple[float, float]:
    return min(values) * (1 - margin), max(values) * (1 + margin)


def _allocator(plan: Plan, records: Sequence[MeasuredRecord], margin: float) -> Proposal | None:
    pairs = [
        (r.max_allocated_bytes, r.max_reserved_bytes)
        for r in records
        if r.max_allocated_bytes and r.max_reserved_bytes is not None
    ]
    if not pairs:
        return None
    fractions = [(res - alloc) / alloc for alloc, res in pairs]
    after = _fraction_band(*_widen(fractions, margin))
    shown = ", ".join(f"{f:.4f}" for f in fractions)
    return Proposal(
        "runtime.allocator_reserve",
        get_value(plan, "runtime.allocator_reserve"),
        after,
        f"(reserved − allocated) ÷ allocated measured {shown} over {len(pairs)} record(s), "
        f"widened by {margin:.0%} each side",
    )


def _fragmentation(
    plan: Plan, stages: Sequence[tuple[MeasuredRecord, Any]], margin: float
) -> Proposal | None:
    """Under the allocator reserve model, ``runtime.fragmentation`` from reserved and
    allocated: ``f = (reserved − allocated − side × σ) / (allocated − steady)`` with the
    stage's persistent part ``steady`` and gathered/bucket bytes ``side`` and σ the middle
    of ``runtime.side_stream_cache`` (engine/allocator/reserve.py); under FSDP2 the side
    cache is its streams' pools at the loss's backward, where such a run peaks
    (engine/allocator/fsdp2_pools.py: σ × the all-gather working set + the freed sharded
    gradients + torchtitan's freed logits block, the loss's T × V blocks out of the
    transient). None when no record has both figures or the stages carry no totals (a
    stub estimate)."""
    rt = resolved(plan).runtime
    sigma = (rt.side_stream_cache.low + rt.side_stream_cache.high) / 2
    if family_of(plan.parallelism.strategy) == "fsdp1":  # no multiplier (ReserveModel.fsdp1)
        sigma = 0.0
    fractions = []
    for r, st in stages:
        totals = getattr(st, "totals", None)
        if totals is None or not r.max_allocated_bytes or r.max_reserved_bytes is None:
            continue
        transient = r.max_allocated_bytes - totals.steady[1]
        if transient <= 0:
            continue
        side_cache = totals.side * sigma
        pools = getattr(totals.side, "fsdp2", None)
        if pools is not None and pools.ag and sigma:  # FSDP2 (fsdp2_pools)
            side_cache = pools.ag * sigma + pools.rs + pools.hole
            side_cache += pools.rs_layer + pools.rs_root  # torch < 2.5: RS inputs' pool
            transient = max(1, transient - pools.loss)
        gap = r.max_reserved_bytes - r.max_allocated_bytes - side_cache
        fractions.append(max(0.0, gap / transient))
    if not fractions:
        return None
    shown = ", ".join(f"{f:.4f}" for f in fractions)
    return Proposal(
        "runtime.fragmentation",
        get_value(plan, "runtime.fragmentation"),
        _fraction_band(*_widen(fractions, margin)),
        f"(reserved − allocated − side-stream cache) ÷ transient allocated measured {shown} "
        f"over {len(fractions)} record(s), widened by {margin:.0%} each side",
    )


def _external(
    plan: Plan, stages: list[tuple[MeasuredRecord, Any]], margin: float, notes: list[str]
) -> list[Proposal]:
    points = []
    for record, stage in stages:
        rng = runtime_range(stage)
        if record.external_bytes is None or rng is None or rng[1] == rng[0]:
            continue
        low, high = rng
        points.append((record.external_bytes, low, high, stage))
    if not points:
        if any(r.external_bytes is not None for r, _ in stages):
            notes.append(
                "external memory was measured but the estimate has no runtime rows "
                "with a range, so the runtime inputs are not calibrated"
            )
        return []
    positions = [((p[0] - p[1]) / (p[2] - p[1])) for p in points]
    t_lo = min((e * (1 - margin) - lo) / (hi - lo) for e, lo, hi, _ in points)
    t_hi = max((e * (1 + margin) - lo) / (hi - lo) for e, lo, hi, _ in points)
    present = {r.role for _, _, _, st in points for r in st.rows if r.state == "runtime"}
    out = []
    for path, role in RUNTIME_FIELDS.items():
        if role not in present:
            continue
        before = get_value(resolved(plan), path)  # a band left to the stack: its default
        width = before["high"] - before["low"]
        after = _byte_band(before["low"] + t_lo * width, before["low"] + t_hi * width)
        shown = ", ".join(f"{t:.2f}" for t in positions)
        out.append(
            Proposal(
                path,
                before,
                after,
                f"external memory measured {min(p[0] for p in points):,}–"
                f"{max(p[0] for p in points):,} B sits at position {shown} of the runtime rows' "
                f"range (0 = low, 1 = high); every runtime input moves there, ±{margin:.0%}",
            )
        )
    return out


TRACE_ACTIVATIONS = "a trace's activations + logits less the ledger's logits"
"""How a trace record's activations are measured (the module doc says why)."""

TRACE_USE_NOTE = (
    "{n} trace record(s) (simulated, no GPU): used for runtime.activation_band only — a "
    "trace measures no allocator reserve and no external memory (CUDA context, NCCL)"
)


def _measured_activations(record: MeasuredRecord, stage: Any) -> tuple[int, str] | None:
    if record.breakdown is not None:
        groups: dict[str, int] = {}
        for key, value in record.breakdown.items():
            group = normalise_category(key)
            groups[group] = groups.get(group, 0) + value
        ledger_logits = estimate_by_category(stage).get("logits")
        if record.simulated and ledger_logits is not None:
            traced = groups.get("activations", 0) + groups.get("logits", 0)
            return traced - sum(ledger_logits) // 2, TRACE_ACTIVATIONS
        return groups.get("activations", 0), "the record's breakdown"
    if record.max_allocated_bytes is None:
        return None
    others = sum(
        (low + high) // 2
        for group, (low, high) in estimate_by_category(stage).items()
        if group != "activations"  # estimate_by_category counts allocated rows only
    )
    return record.max_allocated_bytes - others, "allocated minus the other rows' mid"


def _activation_band(
    plan: Plan, stages: list[tuple[MeasuredRecord, Any]], margin: float, notes: list[str]
) -> Proposal | None:
    band = get_value(plan, "runtime.activation_band")
    if band["high"] <= 0:
        return None
    ratios, how = [], set()
    if stages and not any("activations" in estimate_by_category(st) for _, st in stages):
        notes.append(
            "the estimate has no activation rows, so runtime.activation_band is not calibrated"
        )
        return None
    for record, stage in stages:
        act = estimate_by_category(stage).get("activations")
        measured = _measured_activations(record, stage)
        if act is None or measured is None or act[1] == 0:
            continue
        counted = act[1] / band["high"]
        if band["low"] > 0 and abs(act[0] / band["low"] - counted) > 0.01 * counted:
            notes.append(
                "the activation rows are not a counted amount times the band, so "
                "runtime.activation_band is not calibrated"
            )
            return None
        ratios.append(measured[0] / counted)
        how.add(measured[1])
    if not ratios:
        return None
    shown = ", ".join(f"{r:.4f}" for r in ratios)
    return Proposal(
        "runtime.activation_band",
        band,
        _fraction_band(*_widen(ratios, margin)),
        f"measured ÷ counted activations {shown} ({' and '.join(sorted(how))}), "
        f"widened by {margin:.0%} each side",
    )


def propose(
    plan: Plan,
    records: Sequence[MeasuredRecord],
    est: Any | None = None,
    margin: float = DEFAULT_MARGIN,
) -> Calibration:
    """Proposed edits of the plan's uncertain ranges from the records (see module doc).

    ``est`` defaults to ``estimate(plan)``; a stub with the same shape works in tests.
    Records measured for another config are used, with their warning carried along.
    """
    if not 0 <= margin < 1:
        raise ValueError(f"margin must be in [0, 1), got {margin}")
    est = estimate(plan) if est is None else est
    workload = workload_hash(plan)
    results = [reconcile_record(est, r, workload) for r in records if r.measured]
    warnings = tuple(w for res in results for w in res.warnings)
    stages = [(res.record, est.stages[res.stage]) for res in results]
    used = [res.record for res in results]
    notes: list[str] = []
    if len(used) < len(records):
        notes.append(f"{len(records) - len(used)} record(s) hold no measurement and were skipped")
    traces = sum(1 for r in used if r.simulated)
    if traces:
        notes.append(TRACE_USE_NOTE.format(n=traces))
    on_gpu = [(r, st) for r, st in stages if not r.simulated]
    fragmentation = (
        _fragmentation(plan, on_gpu, margin)
        if resolved(plan).runtime.reserve_model == "allocator"
        else None
    )
    candidates = [
        fragmentation or _allocator(plan, [r for r, _ in on_gpu], margin),
        *_external(plan, on_gpu, margin, notes),
        _activation_band(plan, stages, margin, notes),
    ]
    proposals = tuple(p for p in candidates if p is not None and p.after != p.before)
    return Calibration(proposals, tuple(notes), warnings)


def calibration_changes(
    plan: Plan, records: Sequence[MeasuredRecord], margin: float = DEFAULT_MARGIN
) -> dict[str, Any]:
    """Just the ``{dotted field path: new value}`` edits of :func:`propose`."""
    return propose(plan, records, margin=margin).changes
