"""Estimate vs measured, per rank: three figures, a verdict, and the error by category.

For each record (one rank) the matching stage's estimate is compared on:

=========  ===========================================  ================================
figure     measured (probe)                             estimate
=========  ===========================================  ================================
allocated  ``torch.cuda.max_memory_allocated``          ``StageEstimate.peak``
reserved   ``torch.cuda.max_memory_reserved``           ``StageEstimate.reserved_peak``
external   used − reserved (``cudaMemGetInfo``)         Σ rows with ``state == "runtime"``
device     total − free (``cudaMemGetInfo``)            ``StageEstimate.device_peak``
=========  ===========================================  ================================

The verdict of a figure is *inside* when low ≤ measured ≤ high, else *above* or
*below*; a rank's verdict is that of its allocated figure (the one every record has).
The error is ``measured − mid`` (positive: the estimate is short) and as a percentage
of the measured value. A figure the engine does not estimate yet (an older engine
without ``reserved_peak`` or runtime rows) is reported as *not estimated* with a note,
never compared with zero.

Decomposition by category: when a record carries a breakdown, its categories are
compared with the HBM rows live at the estimate's peak moment (the timeline's moment
within the peak phase, e.g. ``backward.start``; the rows there sum to that moment's
total), summed by ``Row.group`` — rows that are not ``Row.allocated`` (runtime and
allocator reserve) excluded, as they are outside ``max_memory_allocated``. Measured
categories are mapped onto ledger groups by this table (reference cases use the first
column; a probe breakdown may use either):

================  ===========  ======================================================
measured          ledger group why
================  ===========  ======================================================
params            weights      the rank's (sharded) parameters
params_unsharded  gathered     FSDP's all-gathered full parameters of a unit
all_gather        gathered     the all-gather communication buffer
grads             gradients    the rank's (sharded) gradients
grads_unsharded   buckets      full gradients waiting for the reduce-scatter
reduce_scatter    buckets      the reduce-scatter communication buffer
optimizer_state   optimizer    optimizer state (``optimizer`` is state + temp: it is
                               used only when the split is absent)
optimizer_temp    temporaries  the foreach optimizer step's temporary
activations       activations  tensors saved for backward
inputs            inputs       the micro-batch (ids, labels) held for the step
buffers           buffers      module buffers (e.g. RoPE inv_freq)
temp              logits       backward's transient buffers — at the loss, the
                               logits' gradient
================  ===========  ======================================================

One known skew: the reference tracker counts the fp32 logits saved for the loss's
backward under ``activations``, while the ledger keeps them in its ``logits`` group, so
at a loss-time peak the activations line reads high and the logits line low by that
amount; their sum is unaffected.

A category that is in neither column keeps its own name, so a mismatch between the
record's and the ledger's categories shows up as two lines instead of being hidden.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from engine.validation.categories import REFERENCE_CATEGORY_GROUP

if TYPE_CHECKING:  # the record schema: read by whoever loads records (annotations here)
    from engine.validation.records import MeasuredRecord

FigureVerdict = Literal["inside", "above", "below", "not measured", "not estimated"]
FIGURES: tuple[str, ...] = ("allocated", "reserved", "external", "device")

CATEGORY_ALIASES: dict[str, str] = {
    **REFERENCE_CATEGORY_GROUP,
    "grad": "gradients",
    "weight": "weights",
    "activation": "activations",
    "temporary": "temporaries",
}


class RangeLike(Protocol):
    @property
    def low(self) -> int: ...
    @property
    def high(self) -> int: ...


class RowLike(Protocol):
    """What reconcile reads of an engine row (:class:`engine.ledger.row.Row`)."""

    @property
    def group(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def location(self) -> str: ...
    @property
    def allocated(self) -> bool: ...
    @property
    def low(self) -> int: ...
    @property
    def high(self) -> int: ...
    def live_in(self, phase: Any) -> bool: ...
    def live_at(self, moment: Any, accumulating: bool) -> bool: ...


def normalise_category(name: str) -> str:
    """A measured category name as a ledger row group (see the module table)."""
    key = name.strip().lower()
    return CATEGORY_ALIASES.get(key, key)


@dataclass(frozen=True, slots=True)
class Figure:
    """One measured figure against its estimated range."""

    name: str
    measured: int | None
    low: int | None
    high: int | None

    @property
    def verdict(self) -> FigureVerdict:
        if self.measured is None:
            return "not measured"
        if self.low is None or self.high is None:
            return "not estimated"
        if self.measured > self.high:
            return "above"
        if self.measured < self.low:
            return "below"
        return "inside"

    @property
    def mid(self) -> int | None:
        if self.low is None or self.high is None:
            return None
        return (self.low + self.high) // 2

    @property
    def error_bytes(self) -> int | None:
        """measured − mid: positive when the estimate is short."""
        if self.measured is None or self.mid is None:
            return None
        return self.measured - self.mid

    @property
    def error_percent(self) -> float | None:
        """The error as a percentage of the measured value (None when measured is 0)."""
        err = self.error_bytes
        if err is None or not self.measured:
            return None
        return 100.0 * err / self.measured


@dataclass(frozen=True, slots=True)
class RankResult:
    """One record compared with one stage of the estimate."""

    record: MeasuredRecord
    stage: int
    figures: tuple[Figure, ...]
    categories: tuple[Figure, ...]
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def figure(self, name: str) -> Figure:
        return next(f for f in self.figures if f.name == name)

    @property
    def verdict(self) -> FigureVerdict:
        """The rank's verdict: its allocated peak against the estimate's."""
        return self.figure("allocated").verdict


@dataclass(frozen=True, slots=True)
class Reconciliation:
    """Every record of a run against one plan's estimate."""

    config_hash: str
    ranks: tuple[RankResult, ...]
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())

    @property
    def all_inside(self) -> bool:
        return all(r.verdict == "inside" for r in self.ranks)


def _range_attr(stage: Any, name: str) -> tuple[int | None, int | None]:
    rng = getattr(stage, name, None)
    if rng is None:
        return None, None
    return int(rng.low), int(rng.high)


def _hbm_rows(stage: Any) -> list[RowLike]:
    return [r for r in getattr(stage, "rows", ()) if r.location == "hbm"]


def runtime_range(stage: Any) -> tuple[int, int] | None:
    """Σ low, Σ high of the stage's HBM rows with ``state == "runtime"`` (CUDA context,
    NCCL, cuBLAS), or None."""
    rows = [r for r in _hbm_rows(stage) if r.state == "runtime"]
    if not rows:
        return None
    return sum(r.low for r in rows), sum(r.high for r in rows)


def peak_rows(stage: Any) -> list[RowLike]:
    """The allocated HBM rows live at the stage's peak.

    With a timeline (``stage.peak_moments``) these are the rows live at the peak phase's
    peak moment, under the stage's gradient-accumulation switch (``stage.accumulating``);
    they sum to that moment's total. Without one (an older engine, or a stub) they are
    the rows live in the peak phase.
    """
    allocated = [r for r in _hbm_rows(stage) if r.allocated]
    phase = getattr(stage, "peak_phase", None)
    moment = (getattr(stage, "peak_moments", None) or {}).get(phase)
    if moment is not None:
        accumulating = bool(getattr(stage, "accumulating", False))
        return [r for r in allocated if r.live_at(moment, accumulating)]
    return [r for r in allocated if phase is None or r.live_in(phase)]


def estimate_by_category(stage: Any) -> dict[str, tuple[int, int]]:
    """(low, high) per ledger group of the rows live at the stage's peak (see
    :func:`peak_rows`)."""
    out: dict[str, tuple[int, int]] = {}
    for row in peak_rows(stage):
        low, high = out.get(row.group, (0, 0))
        out[row.group] = (low + row.low, high + row.high)
    return out


def _categories(record: MeasuredRecord, stage: Any) -> tuple[Figure, ...]:
    if record.breakdown is None:
        return ()
    measured: dict[str, int] = {}
    for name, value in record.breakdown.items():
        group = normalise_category(name)
        measured[group] = measured.get(group, 0) + value
    estimated = estimate_by_category(stage)
    names = list(estimated) + [n for n in measured if n not in estimated]
    return tuple(Figure(n, measured.get(n, 0), *estimated.get(n, (0, 0))) for n in names)


def _identity(record: MeasuredRecord, plan_hash: str, workload: str | None) -> tuple[str, bool]:
    """A sentence on which plan the record measured, and whether it is a warning.

    Same config hash: silent. Same workload hash (the plan was calibrated since): a note.
    Anything else — another hash, or none at all — is a warning: accepted, but visible.
    """
    if record.config_hash == plan_hash:
        return "", False
    if record.config_hash is None:
        return (
            f"{record.title}: the record carries no config hash, so it cannot be tied to "
            f"this plan ({plan_hash[:12]}); compared anyway"
        ), True
    if workload is not None and record.workload_hash == workload:
        return (
            f"{record.title}: measured for config {record.config_hash[:12]}; this plan "
            f"({plan_hash[:12]}) is the same workload with calibrated runtime ranges"
        ), False
    return (
        f"{record.title}: measured for config {record.config_hash[:12]}, but this plan is "
        f"{plan_hash[:12]} — the plan changed since, or the record belongs to another "
        f"plan; compared anyway"
    ), True


def _stage_for(record: MeasuredRecord, est: Any, warnings: list[str]) -> int:
    stages: Sequence[Any] = est.stages
    heaviest = int(getattr(est, "heaviest_stage", 0))
    if record.pp_stage is None:
        return heaviest
    if record.pp_stage >= len(stages):
        warnings.append(
            f"{record.title}: pipeline stage {record.pp_stage} does not exist in this plan "
            f"({len(stages)} stages); compared with the heaviest stage {heaviest}"
        )
        return heaviest
    return record.pp_stage


def reconcile_record(
    est: Any, record: MeasuredRecord, workload_hash: str | None = None
) -> RankResult:
    """Compare one record with the estimate (see the module docstring for the figures).

    ``est`` is an :class:`engine.estimate.Estimate` or anything with ``config_hash``,
    ``stages`` and ``heaviest_stage``, whose stages have ``rows``, ``peak_phase`` and
    ``peak`` (``reserved_peak`` and ``device_peak`` are used when present).
    ``workload_hash`` (of the plan, see ``identity.py``) turns a config-hash mismatch
    that only comes from calibration into a note instead of a warning.
    """
    warnings: list[str] = []
    notes: list[str] = []
    sentence, is_warning = _identity(record, est.config_hash, workload_hash)
    if sentence:
        (warnings if is_warning else notes).append(sentence)
    world = getattr(est, "world_size", None)
    if world is not None and record.world_size != world:
        warnings.append(
            f"{record.title}: the run had {record.world_size} ranks, the plan has {world}"
        )
    index = _stage_for(record, est, warnings)
    stage = est.stages[index]
    runtime = runtime_range(stage) or (None, None)
    figures = (
        Figure("allocated", record.max_allocated_bytes, *_range_attr(stage, "peak")),
        Figure("reserved", record.max_reserved_bytes, *_range_attr(stage, "reserved_peak")),
        Figure("external", record.external_bytes, *runtime),
        Figure("device", record.device_used_bytes, *_range_attr(stage, "device_peak")),
    )
    return RankResult(
        record, index, figures, _categories(record, stage), tuple(warnings), tuple(notes)
    )


def _engine_notes(est: Any) -> list[str]:
    stage = est.stages[int(getattr(est, "heaviest_stage", 0))]
    notes = []
    if getattr(stage, "reserved_peak", None) is None:
        notes.append(
            "this engine version does not estimate the reserved peak: reserved is not compared"
        )
    if getattr(stage, "device_peak", None) is None:
        notes.append(
            "this engine version does not estimate the device peak: device is not compared"
        )
    if runtime_range(stage) is None:
        notes.append(
            "the estimate has no runtime rows (CUDA context, NCCL, cuBLAS): external memory "
            "is not compared"
        )
    return notes


def reconcile(
    est: Any, records: Iterable[MeasuredRecord], workload_hash: str | None = None
) -> Reconciliation:
    """Every record against the estimate, in rank order; warnings collected up front."""
    ranks = tuple(
        reconcile_record(est, r, workload_hash)
        for r in sorted(records, key=lambda r: (r.label, r.hostname, r.rank))
    )
    warnings = tuple(w for r in ranks for w in r.warnings)
    notes = [n for r in ranks for n in r.notes] + _engine_notes(est)
    return Reconciliation(est.config_hash, ranks, warnings, tuple(notes))
