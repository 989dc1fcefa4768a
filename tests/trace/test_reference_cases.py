"""The trace reproduces the shared measured cases (../shared/reference/measured).

Those cases were measured with torch 2.13.0 (CPU), transformers 5.24.0 and peft 0.21.2
by PyTorch's MemTracker / FSDPMemTracker on fake tensors with 512-B rounding — the
method the trace implements — so with the same versions the steady step's peak, the
activations saved after forward and the model states must come out byte for byte, not
merely within the 0.5 % the issue allows. Three cases cover the paths: plain fp32
(MemTracker), LoRA over a bf16 base (frozen weights: hooks on trainable parameters
only), and FSDP2 × 8 with MixedPrecisionPolicy, a tied head and full recomputation
(FSDPMemTracker, the DTensor-propagation filter). All eleven are checked by
``tests/fidelity_grid.py --cases``.
"""

from __future__ import annotations

import pytest

from engine.trace.runner import trace_plan
from tests.measured_cases import load_cases, plan_for_case
from tests.trace.needs_extra import needs_trace_extra

pytestmark = needs_trace_extra

CHOSEN = (
    "smollm-135m-full-s2048-b1-ws1plain-fp32-acnone",
    "smollm-135m-lora-s2048-b1-ws1plain-bf16-acnone",
    "llama-1b-full-s4096-b1-ws8fsdp-bf16_mixed-acfull-rs",
)


@pytest.mark.parametrize("name", CHOSEN)
def test_trace_equals_measured_case(name: str) -> None:
    case = next(c for c in load_cases() if c.name == name)
    result = trace_plan(plan_for_case(case))
    assert result.peak_bytes == case.peak_bytes
    assert result.peak_phase.phase == case.peak_phase
    assert result.saved_activations == case.saved_activations
    for key in ("params", "grads", "optimizer_state", "optimizer_step_temp", "buffers"):
        assert result.model_states[key] == case.model_states[key], key
    assert abs(result.peak_bytes - case.peak_bytes) <= 0.005 * case.peak_bytes
