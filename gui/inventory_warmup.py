"""Large models' tensor inventories, built off the GUI thread before their first estimate.

An estimate is a few milliseconds once the model's tensor inventory is cached
(:func:`engine.models.inventory.build_inventory`, per architecture), but building it
is proportional to layers × experts: DeepSeek-V3's 45,000 tensors take ~0.7 s,
DeepSeek-V2's ~0.2 s, Qwen3-30B-A3B's ~0.15 s on one free core — a frozen window
whenever a new large architecture is estimated on the GUI thread (a preset applied, a
config imported, a file opened, an architecture field edited, an undo back to it).

:class:`InventoryWarmup` says whether an architecture is :meth:`~InventoryWarmup.ready`
(small, or built here before) and builds a heavy one on a pool thread
(:class:`gui.workers.TaskRunner`): the thread must be in this process, since the
inventory is needed in this process's cache. While it runs the GUI thread still gets
the GIL back within :data:`gui.gil_policy.SWITCH_INTERVAL_S`. Only the latest request's
result is delivered (by :attr:`~InventoryWarmup.warmed`), so a second model chosen
while the first builds supersedes it.
"""

from __future__ import annotations

from collections import OrderedDict

from PySide6.QtCore import QObject, Signal

from engine.models.inventory import build_inventory
from engine.models.spec import ArchitectureSpec
from gui.workers import TaskRunner

HEAVY_TENSOR_GROUPS = 256
"""Layers × routed experts above which a model's inventory is built off the GUI thread.
Every dense preset (≤ 126 layers, Llama-3.1-405B's 1,137 tensors: ~17 ms) and the small
MoE (Mixtral-8x7B: 32 × 8) stay below and are estimated at once; Phi-3.5-MoE (32 × 16)
and up go to the thread (Qwen1.5-MoE, 24 × 60: ~75 ms on a loaded machine)."""

WARM_KEPT = 32
"""Architectures remembered as built. Half the inventory cache's 64 entries
(``build_inventory``'s ``lru_cache``): the engine's other callers in this process (a
sweep, a comparison) may use a few more specs in between without evicting one of these;
one evicted anyway costs a rebuild on the GUI thread (a stall, never a wrong figure)."""


def heavy(spec: ArchitectureSpec) -> bool:
    """Whether building ``spec``'s tensor inventory would stall the window (see above)."""
    experts = spec.moe.num_experts if spec.moe is not None else 1
    return spec.layers * max(1, experts) > HEAVY_TENSOR_GROUPS


def _build(spec: ArchitectureSpec) -> ArchitectureSpec:
    """Build (and cache) the inventory; the spec comes back to say which one is ready."""
    build_inventory(spec)
    return spec


class InventoryWarmup(QObject):
    """Which architectures can be estimated at once, and the building of the others."""

    warmed = Signal(object)  # the ArchitectureSpec whose inventory is now cached

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._warm: OrderedDict[ArchitectureSpec, None] = OrderedDict()
        self._runner = TaskRunner(self)
        self._runner.finished.connect(self._finished)
        self._runner.failed.connect(self._failed)
        self.building: ArchitectureSpec | None = None  # the latest request, until it is done

    def ready(self, spec: ArchitectureSpec) -> bool:
        """Whether an estimate of ``spec`` on the GUI thread is quick now."""
        return spec in self._warm or not heavy(spec)

    def note_built(self, spec: ArchitectureSpec) -> None:
        """``spec`` was just estimated (its inventory is cached): keep it, most recent last."""
        if heavy(spec):
            self._warm[spec] = None
            self._warm.move_to_end(spec)
            while len(self._warm) > WARM_KEPT:
                self._warm.popitem(last=False)

    def build(self, spec: ArchitectureSpec) -> None:
        """Build ``spec``'s inventory on the pool thread (the latest request wins; asking
        again for the one being built does nothing)."""
        if spec != self.building:
            self.building = spec
            self._runner.start(lambda _progress: _build(spec))

    def cancel(self) -> None:
        """The plan no longer needs the inventory being built (its result is dropped)."""
        if self.building is not None:
            self.building = None
            self._runner.cancel()

    def _finished(self, spec: object) -> None:
        if isinstance(spec, ArchitectureSpec) and spec == self.building:
            self.building = None
            self.note_built(spec)
            self.warmed.emit(spec)

    def _failed(self, _message: str) -> None:
        """The build raised: say it is done anyway, so the estimate runs on the GUI thread
        and reports the engine's own error the usual way (nothing is marked built)."""
        spec, self.building = self.building, None
        if spec is not None:
            self.warmed.emit(spec)

    def shutdown(self) -> None:
        self.building = None
        self._runner.shutdown()
