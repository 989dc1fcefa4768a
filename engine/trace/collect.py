"""Phase marks into phase records, and the model states of the steady step.

Shared by both implementations of a trace — transformers' modules (``runner.py``) and
torchtitan's own (``titan/runner.py``) — so a record means the same whichever ran.
"""

from __future__ import annotations

from typing import Any

from engine.trace.optim import state_tensors
from engine.trace.result import PhaseRecord
from engine.trace.tracker import PhaseMark, to_snapshot


class Collector:
    """Turns the tracker's phase marks into :class:`PhaseRecord`\\ s."""

    def __init__(self, tracker: Any, optimizer: Any, inputs: list[Any]) -> None:
        self.tracker, self.optimizer = tracker, optimizer
        self.input_bytes = tracker.storage_bytes(inputs)
        self.records: list[PhaseRecord] = []

    def __call__(self, step: int, micro: int, phase: str, mark: PhaseMark) -> None:
        state = self.tracker.storage_bytes(state_tensors(self.optimizer))
        peak = to_snapshot(mark.peak, self.input_bytes, state)
        end = to_snapshot(mark.end, self.input_bytes, state)
        self.records.append(PhaseRecord(step, micro, phase, peak, end, mark.moment))


def model_states(records: list[PhaseRecord], optimizer_state: int) -> dict[str, int]:
    """Parameters, gradients, optimizer state and step temporaries of the last step:
    gradients as the last backward left them, the rest at the step's end."""
    last = records[-1].step
    steady = [r for r in records if r.step == last]
    backward = [r for r in steady if r.phase == "backward"][-1]
    optimizer = next(r for r in steady if r.phase == "optimizer")
    end = steady[-1].end
    return {
        "params": end.get("params"),
        "grads": backward.end.get("grads"),
        "optimizer_state": optimizer_state,
        "optimizer_step_temp": optimizer.peak.get("optimizer_temp"),
        "buffers": end.get("buffers"),
    }
