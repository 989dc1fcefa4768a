"""One pipeline stage of an estimate: its numbers, worked out at once, and its rows,
built when first read.

A stage's numbers (:class:`StageTotals`) are all the verdict and the layout search
need: each phase's allocated and reserved range, the peaks and the timeline. Stages of
equal numbers (the same make-up and micro-batches in flight) share one
:class:`StageTotals`. The rows — and each phase's allocator reserve row — are built
from the resolved plan when a view first reads them
(:func:`~engine.ledger.stage_rows.stage_rows`: built from the very parts whose sums
the numbers are).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

from engine.allocator.reserve import AtLoss, ReserveModel
from engine.ledger.peaks.runtime import reserve_bytes, reserve_row
from engine.ledger.phases import Range, new_range, phase_totals
from engine.ledger.row import MOMENTS, Location, Moment, Phase, Row
from engine.ledger.stage_rows import stage_rows
from engine.plan import Plan

_MOMENT_NAMES: tuple[Moment, ...] = tuple(m for m, _ in MOMENTS)


class StageTotals(NamedTuple):
    """A stage's numbers: the allocated (lows, highs) at each of MOMENTS, the peak phase
    (the first with the largest range), the device and fit peaks there, the step-wide
    timeline rules and the allocator reserve's factors. Each phase's range, peak moment
    and reserved range are worked out from the moments when first read (``made``, filled
    then): the verdict and the heaviest stage need only the peaks."""

    lows: list[int]
    highs: list[int]
    peak_phase: Phase
    runtime: tuple[int, int]  # the memory outside the allocator (context, NCCL, cuBLAS)
    fit_peak: Range
    accumulating: bool
    keep_all_gathered: bool
    reserve: ReserveModel  # peaks.runtime.reserve_factors
    side: int  # the stage's gathered units and buckets (the side-stream pools)
    made: list[Any]  # [phases, peak moments, reserved phases] once read, else empty
    stuck: tuple[int, int] = (0, 0)  # the unreleasable reserve at :attr:`peak` (fit_peak's)

    def _made(self) -> list[Any]:
        made = self.made
        if not made:
            phases, peak_moments = phase_totals(self.lows, self.highs)
            reserved = {}
            for ph, r in phases.items():
                at, m = self.at_loss(ph), peak_moments[ph]
                low, high = reserve_bytes(
                    self.reserve, r.low, r.high, self.steady, self.side, at, m
                )
                reserved[ph] = new_range((r.low + low, r.high + high))
            made += [phases, peak_moments, reserved]
        return made

    def at_loss(self, phase: Phase) -> tuple[int, int] | None:
        """The allocated (low, high) at the loss's backward (``backward.start``) for the
        backward phase's reserve, None for the others."""
        i = _MOMENT_NAMES.index("backward.start")  # carrying backward.layers (AtLoss)
        at = AtLoss((self.lows[i], self.highs[i]), (self.lows[i + 1], self.highs[i + 1]))
        return at if phase == "backward" else None

    @property
    def steady(self) -> tuple[int, int]:
        """The allocated (low, high) at the steady moment: the persistent part, on which
        the allocator keeps no reserve."""
        return self.lows[0], self.highs[0]

    @property
    def phases(self) -> dict[Phase, Range]:
        """Each phase's allocated range (its moments' largest low and largest high)."""
        return self._made()[0]  # type: ignore[no-any-return]

    @property
    def peak_moments(self) -> dict[Phase, Moment]:
        return self._made()[1]  # type: ignore[no-any-return]

    @property
    def reserved_phases(self) -> dict[Phase, Range]:
        return self._made()[2]  # type: ignore[no-any-return]

    @property
    def peak(self) -> Range:
        """The allocated peak: the largest low of any moment and the largest high (the
        peak phase's), as :func:`~engine.ledger.phases.peak_phase_of` gives them."""
        return new_range((max(self.lows), max(self.highs)))

    @property
    def reserved_peak(self) -> Range:
        """:attr:`peak` plus the allocator reserve at the peak phase."""
        peak, ph = self.peak, self.peak_phase
        at, m = self.at_loss(ph), self.peak_moments[ph]
        low, high = reserve_bytes(self.reserve, peak.low, peak.high, self.steady, self.side, at, m)
        return new_range((peak.low + low, peak.high + high))

    @property
    def device_peak(self) -> Range:
        """:attr:`reserved_peak` plus the memory outside the allocator: worked out when
        read (a view shows it; the verdict and the layout search never read it)."""
        (low, high), (rt_low, rt_high) = self.reserved_peak, self.runtime
        return new_range((low + rt_low, high + rt_high))


@dataclass(frozen=True, slots=True, eq=False)
class StageEstimate:
    """One pipeline stage as seen by its heaviest rank.

    The numbers (``totals``) are worked out when the estimate is made; the rows (and
    each phase's allocator reserve row) are built from ``source``, the resolved plan,
    when first read — the layout search and most edits never read them. Equality sees
    every value and the rows, as when they were built at once."""

    stage: int
    layers: range
    totals: StageTotals = field(repr=False)
    source: Plan | None = field(default=None, repr=False)  # the resolved plan the rows are of
    built_rows: tuple[Row, ...] | None = field(default=None, repr=False)  # rows once read
    built_reserves: dict[Phase, Row] | None = field(default=None, repr=False)

    @property
    def phases(self) -> dict[Phase, Range]:
        """Allocated (tensors): each phase's largest moment."""
        return self.totals.phases

    @property
    def peak_phase(self) -> Phase:
        return self.totals.peak_phase

    @property
    def peak(self) -> Range:
        """HBM allocated at the peak (what max_memory_allocated reports): the largest
        phase's high, and the largest low of any phase — the peak is at least what any
        moment holds at least (:func:`~engine.ledger.phases.peak_phase_of`), which is
        the peak phase's own low but where another phase's low is larger."""
        return self.totals.peak

    @property
    def moments(self) -> dict[Moment, Range]:
        """Allocated at each moment of the step (the finer timeline)."""
        t = self.totals
        ranges = map(new_range, zip(t.lows, t.highs, strict=True))
        return dict(zip(_MOMENT_NAMES, ranges, strict=True))

    @property
    def reserved_phases(self) -> dict[Phase, Range]:
        """Each phase's allocated range plus the allocator reserve."""
        return self.totals.reserved_phases

    @property
    def reserved_peak(self) -> Range:
        """What max_memory_reserved reports: :attr:`peak` plus the allocator reserve."""
        return self.totals.reserved_peak

    @property
    def device_peak(self) -> Range:
        """Reserved + CUDA context, NCCL, cuBLAS (what nvidia-smi shows)."""
        return self.totals.device_peak

    @property
    def fit_peak(self) -> Range:
        """What must fit the capacity that decides the verdict."""
        return self.totals.fit_peak

    @property
    def peak_moments(self) -> dict[Phase, Moment]:
        """Each phase's peak moment."""
        return self.totals.peak_moments

    @property
    def accumulating(self) -> bool:
        """Gradients live across micro-batches (the timeline's rule)."""
        return self.totals.accumulating

    @property
    def keep_all_gathered(self) -> bool:
        """Every unit stays gathered forward → backward (the rows say so in their
        moments; kept for views that explain the timeline)."""
        return self.totals.keep_all_gathered

    @property
    def rows(self) -> tuple[Row, ...]:
        """The stage's rows, the peak phase's allocator reserve last (built when first
        read)."""
        rows = self.built_rows
        if rows is None:
            assert self.source is not None, "a stage estimate without its plan"
            listed = stage_rows(self.source, self.stage)
            listed.append(self.phase_reserves[self.peak_phase])
            rows = tuple(listed)
            object.__setattr__(self, "built_rows", rows)
        return rows

    @property
    def phase_reserves(self) -> dict[Phase, Row]:
        """The allocator reserve row of each phase (built when first read)."""
        reserves = self.built_reserves
        if reserves is None:
            assert self.source is not None, "a stage estimate without its plan"
            plan = self.source
            t = self.totals
            reserves = {
                ph: reserve_row(
                    plan, r.low, r.high, t.steady, t.side, t.at_loss(ph), t.peak_moments[ph]
                )
                for ph, r in self.phases.items()
            }
            object.__setattr__(self, "built_reserves", reserves)
        return reserves

    def _key(self) -> tuple[object, ...]:
        """What equality compares: every value a view reads, the rows included."""
        return (
            self.stage,
            self.layers,
            self.rows,
            self.phases,
            self.peak_phase,
            self.moments,
            self.reserved_phases,
            self.device_peak,
            self.fit_peak,
            self.peak_moments,
            self.phase_reserves,
            self.accumulating,
            self.keep_all_gathered,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StageEstimate):
            return NotImplemented
        return self is other or self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]  # holds dicts, as before: not hashable

    def __getstate__(self) -> list[Any]:
        """Pickled with its rows built: the window's analysis process sends estimates
        across, and a row pickles its formula's text."""
        _ = self.rows, self.phase_reserves
        return [getattr(self, f.name) for f in fields(self)]

    def __setstate__(self, state: list[Any]) -> None:
        for f, value in zip(fields(self), state, strict=True):
            object.__setattr__(self, f.name, value)

    def phase_rows(self, phase: Phase) -> tuple[Row, ...]:
        """The rows live at ``phase``'s peak moment, its allocator reserve and the memory
        outside the allocator: what a stacked chart of the phase shows. Computed on demand
        (views need it; the layout search does not)."""
        moment = self.peak_moments.get(phase, next(m for m, ph in MOMENTS if ph == phase))
        live = [r for r in self.rows if r.allocated and r.live_at(moment, self.accumulating)]
        runtime = [r for r in self.rows if r.location == "hbm" and r.state == "runtime"]
        reserve = self.phase_reserves.get(phase)
        return (*live, *([reserve] if reserve else []), *runtime)

    def location_total(self, location: Location) -> Range:
        rs = [r for r in self.rows if r.location == location]
        return Range(sum(r.low for r in rs), sum(r.high for r in rs))
