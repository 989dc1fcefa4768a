"""A large model's first estimate, computed off the GUI thread.

An estimate takes milliseconds once the model's tensor inventory is cached
(:func:`engine.models.inventory.build_inventory`, per architecture) along with the
ledger's other per-model memos, but the first one of a large architecture builds them:
DeepSeek-V3's 45,000 tensors take ~0.7 s, DeepSeek-V2's ~0.2 s, Qwen3-30B-A3B's ~0.15 s
on one free core — a frozen window whenever a new large architecture is estimated on
the GUI thread (a preset applied, a config imported, a file opened, an architecture
field edited, an undo back to it).

:class:`ColdEstimates` says whether an architecture is :meth:`~ColdEstimates.ready`
(small, or estimated here before) and estimates a plan of any other on a pool thread
(:class:`gui.workers.workers.TaskRunner`; the engine is pure functions with thread-safe
caches, as sweeps and comparisons use it). It must be a thread of this process: the
inventory is wanted in this process's cache, for the edits that follow. While it runs
the GUI thread gets the GIL back within :data:`gui.workers.gil_policy.SWITCH_INTERVAL_S`. Only
the latest request's result is delivered (:attr:`~ColdEstimates.done`), so a plan
chosen while another is being estimated supersedes it.
"""

from __future__ import annotations

from collections import OrderedDict

from PySide6.QtCore import QObject, Signal

from engine.errors import PlanError
from engine.estimate import Estimate, estimate
from engine.models.spec import ArchitectureSpec
from engine.plan import Plan
from gui.workers.workers import TaskRunner

HEAVY_TENSOR_GROUPS = 256
"""Layers × routed experts above which a model's first estimate runs off the GUI thread.
Every dense preset (≤ 126 layers; Llama-3.1-405B's 1,137 tensors take ~17 ms) and the
small MoE (Mixtral-8x7B: 32 × 8) stay below and are estimated at once; Phi-3.5-MoE
(32 × 16) and up go to the thread (Qwen1.5-MoE, 24 × 60: ~75 ms on a loaded machine)."""

WARM_KEPT = 32
"""Architectures remembered as estimated. Half the inventory cache's 64 entries
(``build_inventory``'s ``lru_cache``): the engine's other callers in this process (a
sweep, a comparison) may use a few more specs in between without evicting one of these;
one evicted anyway costs a rebuild on the GUI thread (a stall, never a wrong figure)."""


def heavy(spec: ArchitectureSpec) -> bool:
    """Whether the first estimate of ``spec`` would stall the window (see above)."""
    experts = spec.moe.num_experts if spec.moe is not None else 1
    return spec.layers * max(1, experts) > HEAVY_TENSOR_GROUPS


def _estimate(plan: Plan) -> tuple[Plan, Estimate | PlanError]:
    """The plan's estimate, or the PlanError that says why there is none."""
    try:
        return plan, estimate(plan)
    except PlanError as exc:
        return plan, exc


class ColdEstimates(QObject):
    """Which plans can be estimated at once, and the estimate of the others."""

    done = Signal(object, object)  # the plan; its Estimate, PlanError, or None (it raised)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._warm: OrderedDict[ArchitectureSpec, None] = OrderedDict()
        self._runner = TaskRunner(self)
        self._runner.finished.connect(self._finished)
        self._runner.failed.connect(self._failed)
        self.running: Plan | None = None  # the latest request, until it is done

    def ready(self, spec: ArchitectureSpec) -> bool:
        """Whether an estimate with ``spec`` on the GUI thread is quick now."""
        return spec in self._warm or not heavy(spec)

    def note_built(self, spec: ArchitectureSpec) -> None:
        """A plan of ``spec`` was just estimated (its caches are filled): keep it, most
        recent last."""
        if heavy(spec):
            self._warm[spec] = None
            self._warm.move_to_end(spec)
            while len(self._warm) > WARM_KEPT:
                self._warm.popitem(last=False)

    def start(self, plan: Plan) -> None:
        """Estimate ``plan`` on the pool thread (the latest request wins; asking again
        for the plan being estimated does nothing)."""
        if plan is not self.running:
            self.running = plan
            self._runner.start(lambda _progress: _estimate(plan))

    def cancel(self) -> None:
        """The plan being estimated is no longer wanted (its result is dropped)."""
        if self.running is not None:
            self.running = None
            self._runner.cancel()

    def _finished(self, result: object) -> None:
        plan = self.running
        if isinstance(result, tuple) and plan is not None and result[0] is plan:
            self.running = None
            self.note_built(plan.model.architecture)
            self.done.emit(plan, result[1])

    def _failed(self, _message: str) -> None:
        """The estimate raised (not a PlanError): say it is done without a value, so the
        GUI thread estimates and the error surfaces the usual way."""
        plan, self.running = self.running, None
        if plan is not None:
            self.done.emit(plan, None)

    def shutdown(self) -> None:
        self.running = None
        self._runner.shutdown()
