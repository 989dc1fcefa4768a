"""Fakes for validation tests: a fake ``torch`` and a stub Estimate.

The fake torch is a scripted CUDA device: a test sets what the "training step" allocates
and reserves, and the fake answers ``max_memory_allocated``, ``mem_get_info`` and the
rest the way the CUDA caching allocator does (peaks since the last reset; reserved
memory only grows; memory outside PyTorch is a fixed ``external`` amount).
"""

from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.estimate import Range
from engine.ledger.row import PHASES, Location, Phase, Role, Row, State, make_row
from engine.units import GiB


@dataclass
class FakeCudaState:
    total: int = 80 * GiB
    external: int = 0
    allocated: int = 0
    reserved: int = 0
    peak_allocated: int = 0
    peak_reserved: int = 0
    resets: list[int] = field(default_factory=list)

    def run_step(self, peak_allocated: int, end_allocated: int, reserved: int) -> None:
        """One training step: allocations rise to ``peak_allocated`` and fall back."""
        self.peak_allocated = max(self.peak_allocated, peak_allocated)
        self.allocated = end_allocated
        self.reserved = max(self.reserved, reserved)
        self.peak_reserved = max(self.peak_reserved, self.reserved)


def make_fake_torch(state: FakeCudaState, steps: Callable[[], int]) -> types.ModuleType:
    torch = types.ModuleType("torch")
    torch.__version__ = "9.9.9+fake"  # type: ignore[attr-defined]
    torch.version = types.SimpleNamespace(cuda="12.8")  # type: ignore[attr-defined]

    def reset(device: Any = None) -> None:
        state.resets.append(steps())
        state.peak_allocated = state.allocated
        state.peak_reserved = state.reserved

    cuda = types.SimpleNamespace(
        is_available=lambda: True,
        synchronize=lambda device=None: None,
        reset_peak_memory_stats=reset,
        max_memory_allocated=lambda device=None: state.peak_allocated,
        max_memory_reserved=lambda device=None: state.peak_reserved,
        memory_reserved=lambda device=None: state.reserved,
        mem_get_info=lambda device=None: (
            state.total - state.reserved - state.external,
            state.total,
        ),
        current_device=lambda: 0,
        get_device_name=lambda index=None: "Fake H100 80GB",
        memory_stats=lambda device=None: {
            "allocated_bytes.all.peak": state.peak_allocated,
            "num_alloc_retries": 0,
            "num_ooms": 0,
            "unrelated.key": 7,
        },
        nccl=types.SimpleNamespace(version=lambda: (2, 27, 3)),
    )
    torch.cuda = cuda  # type: ignore[attr-defined]
    torch.distributed = types.SimpleNamespace(  # type: ignore[attr-defined]
        is_available=lambda: True, is_initialized=lambda: False
    )
    return torch


_STATE_OF_GROUP: dict[str, State] = {
    "weights": "weights",
    "gradients": "grads",
    "optimizer": "optimizer",
    "activations": "activations",
    "temporaries": "optimizer_step",
    "runtime": "runtime",
    "allocator": "allocator",
}


def row(
    rid: str,
    group: str,
    low: int,
    high: int,
    phases: tuple[Phase, ...] = PHASES,
    location: Location = "hbm",
    role: Role | None = None,
) -> Row:
    """A test row; its state follows its chart group (runtime rows are outside the
    allocator, as in the engine)."""
    return make_row(
        id=rid,
        label=rid,
        state=_STATE_OF_GROUP[group],
        location=location,
        kind="persistent",
        group=group,
        low=low,
        high=high,
        formula="test",
        source="test",
        phases=frozenset(phases),
        role=role,
    )


@dataclass(frozen=True)
class StubStage:
    """The StageEstimate interface reconcile reads; reserved/device are optional."""

    rows: tuple[Row, ...]
    peak: Range
    peak_phase: Phase = "backward"
    reserved_peak: Range | None = None
    device_peak: Range | None = None


@dataclass(frozen=True)
class StubEstimate:
    config_hash: str
    stages: tuple[StubStage, ...]
    heaviest_stage: int = 0
    world_size: int = 1

    @property
    def heaviest(self) -> StubStage:
        return self.stages[self.heaviest_stage]
