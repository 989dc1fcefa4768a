"""One plan's analysis: its estimate and every answer found by searching or re-estimating.

The window, the PDF report and the command line show the same answers for a plan: the
estimate, the three GPU counts (with the chosen layout, alternatives and rejected
layouts), the diagnostics, the sensitivity bars and what still fits the plan's layout
(the largest micro-batch, the longest sequence). :func:`analysis` is the one place that
composes them, so no front end assembles its own mix, and each part is computed at most
once per plan however many views ask.

The parts cost very differently: the estimate takes about a millisecond, the layout
search and the re-estimating questions tens to hundreds. So an :class:`Analysis` is
lazy: each part is computed on first access and kept. A caller that needs only the
estimate (``memplan estimate --no-counts``, the window on every keystroke) never pays
for the search; the window asks for the slow parts on a worker thread, and a report
written afterwards finds them ready. Parts are computed under a per-part lock, so two
threads asking for the same part compute it once, while a thread asking for another
part does not wait.

A part that fails because the plan cannot be computed (:class:`PlanError`) fails the
same way on every access; the error is kept like a result.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, cast, get_args

from engine.errors import PlanError
from engine.estimate import Estimate, estimate
from engine.layout.counts import SEARCH_BUDGET_S, GpuCounts, gpu_counts
from engine.layout.levers import Lever, LeverSummary, fit_levers
from engine.layout.shapes import Layout, layout_of
from engine.plan import Plan
from engine.whatif.diagnostics import Diagnosis, diagnose
from engine.whatif.fit import FitResult, largest_micro_batch, longest_sequence
from engine.whatif.sensitivity import Bar, sensitivity

Part = Literal["estimate", "counts", "diagnosis", "sensitivity", "fit", "levers", "lever_summaries"]
PARTS: tuple[Part, ...] = get_args(Part)

ANALYSES_KEPT = 32
"""Plans whose analysis is kept (least recently used dropped first): enough for undo and
redo across a session's recent edits without holding every plan ever typed."""

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class FitLimits:
    """What still fits the plan's own layout when one batch input grows."""

    layout: Layout
    micro_batch: FitResult
    sequence: FitResult


@dataclass(frozen=True, slots=True)
class _Failed:
    error: PlanError


@dataclass(frozen=True)
class Analysis:
    """The analysis of one plan; every part computed on first access, then kept."""

    plan: Plan
    config_hash: str
    search_budget_s: float | None = SEARCH_BUDGET_S  # the searches' wall-clock budget
    _done: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    _locks: dict[str, threading.Lock] = field(
        default_factory=lambda: {p: threading.Lock() for p in PARTS}, repr=False, compare=False
    )

    def _part(self, name: Part, compute: Callable[[], T]) -> T:
        with self._locks[name]:
            if name not in self._done:
                try:
                    self._done[name] = compute()
                except PlanError as exc:
                    self._done[name] = _Failed(exc)
            got = self._done[name]
        if isinstance(got, _Failed):
            raise got.error
        return cast(T, got)

    def computed(self, name: Part) -> bool:
        """Whether ``name`` is ready (an access then costs nothing)."""
        return name in self._done

    def provide(self, name: Part, value: object) -> None:
        """Keep a part computed elsewhere (the window's worker process) unless it is
        already here, so a report written afterwards finds it ready. A PlanError value
        is kept as that part's failure."""
        with self._locks[name]:
            if name not in self._done:
                self._done[name] = _Failed(value) if isinstance(value, PlanError) else value

    def _estimator(self, plan: Plan) -> Estimate:
        """The estimator the what-if parts share: this plan's own estimate is reused."""
        return self.estimate if plan == self.plan else estimate(plan)

    @property
    def estimate(self) -> Estimate:
        """The plan's estimate (raises PlanError when the plan cannot be computed)."""
        return self._part("estimate", lambda: estimate(self.plan))

    @property
    def counts(self) -> GpuCounts:
        """The three GPU counts, the chosen layout, alternatives and rejected layouts,
        searched up to the plan's ``policy.max_gpus`` within :attr:`search_budget_s`."""
        return self._part("counts", lambda: gpu_counts(self.plan, budget_s=self.search_budget_s))

    @property
    def diagnosis(self) -> Diagnosis:
        """Dominant rows and one-change suggestions (raises PlanError like the estimate)."""
        return self._part("diagnosis", lambda: diagnose(self.plan, self._estimator))

    @property
    def sensitivity(self) -> tuple[Bar, ...]:
        """Tornado bars, widest swing first (raises PlanError like the estimate)."""
        return self._part("sensitivity", lambda: tuple(sensitivity(self.plan, self._estimator)))

    @property
    def fit(self) -> FitLimits:
        """The largest micro-batch and the longest sequence that fit the plan's layout."""
        return self._part(
            "fit",
            lambda: FitLimits(
                layout_of(self.plan),
                largest_micro_batch(self.plan, estimator=self._estimator),
                longest_sequence(self.plan, estimator=self._estimator),
            ),
        )

    @property
    def levers(self) -> tuple[Lever, ...]:
        """Fit levers (recompute, offload, LoRA, QLoRA, micro-batch 1), each searched like
        the plan, never applied to it."""
        return self._part("levers", lambda: fit_levers(self.plan, budget_s=self.search_budget_s))

    @property
    def lever_summaries(self) -> tuple[LeverSummary, ...]:
        """What the window and the report print of the fit levers (a few hundred bytes
        each, where a lever holds its whole search): the part the window's worker
        process sends back."""
        return self._part(
            "lever_summaries", lambda: tuple(LeverSummary.of(lv) for lv in self.levers)
        )

    def get(self, name: Part) -> object:
        """A part by name (what a background job asks for, one part at a time)."""
        value: object = getattr(self, name)
        return value


_cache: OrderedDict[tuple[str, float | None], Analysis] = OrderedDict()
_cache_lock = threading.Lock()


def analysis(plan: Plan, search_budget_s: float | None = SEARCH_BUDGET_S) -> Analysis:
    """The analysis of ``plan``: the same object for every plan with the same config
    hash and search budget, while it is among the last :data:`ANALYSES_KEPT` asked for.

    ``search_budget_s`` bounds the GPU-count searches in wall-clock seconds (None:
    unbounded). It is not part of the plan: it changes how long the answer may take, not
    the question — but a search stopped by it may answer differently, so it keys the cache."""
    key = (plan.config_hash(), search_budget_s)
    with _cache_lock:
        got = _cache.get(key)
        if got is None:
            got = _cache[key] = Analysis(plan, key[0], search_budget_s)
            while len(_cache) > ANALYSES_KEPT:
                _cache.popitem(last=False)
        else:
            _cache.move_to_end(key)
        return got


def forget_analyses() -> None:
    """Drop every kept analysis (tests that swap the estimator use it)."""
    with _cache_lock:
        _cache.clear()
