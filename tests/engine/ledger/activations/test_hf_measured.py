"""The hf-transformers profile against ../shared/reference/measured, to the byte.

With the activation band set to exactly 1, the counted tensors must equal what PyTorch
allocated. Hand check, SmolLM-135M pure bf16, s = 2048, b = 1 (T = 2048, h 576, a 9,
k 3, d 64, I 1536, V 49152, 30 layers): per layer per token
input_layernorm 4h + 4 + 2h + 2h = 4,612; SDPA q 2·576 + k, v 2·2·192 + out 2·576 +
lse 4·9 = 3,108; post-attention norm 4,612; MLP 4 × 2I = 12,288 → 24,620 B/token
→ 50,421,760 B/layer → 1,512,652,800 B. Final norm 4,612·2048 = 9,445,376; fp32
log-probs 2048·49152·4 = 402,653,184; cos/sin 2·2048·64·2 = 524,288; labels (b = 1: a
view of the padded (1, 2049) int64) 16,392 → 16,896; two loss scalars 1,024.
Sum 1,925,293,568 B = the measured saved_activations_after_forward.
"""

from __future__ import annotations

import pytest

from engine.estimate import estimate
from engine.ledger.activations.geometry import geometry
from engine.ledger.activations.loss import logits_rows
from engine.ledger.activations.rows import activation_rows
from engine.ledger.activations.schedule import in_flight
from engine.plan import Plan, with_value
from engine.stacks.defaults import resolved
from tests.measured_cases import Case, load_cases, plan_for_case

SAVED = ("hbm.activations.saved.", "hbm.loss.saved", "hbm.loss.labels")


def _exact(case: Case) -> Plan:
    exact = with_value(plan_for_case(case), "runtime.activation_band", {"low": 1.0, "high": 1.0})
    return resolved(exact)


def _cases() -> list[Case]:
    return load_cases()


def test_saved_activations_to_the_byte() -> None:
    """Every case, LoRA included (counted from the activation rows directly)."""
    for case in _cases():
        plan = _exact(case)
        rows = activation_rows(plan, 0, plan.model.architecture.layers, ()) + logits_rows(
            plan, geometry(plan), in_flight(plan, 0)
        )
        if plan.method.precision.policy == "autocast" and not case.inputs["fsdp"]:
            rows = [r for r in estimate(plan).rows]  # weight casts need the placed tensors
        saved = sum(r.low for r in rows if r.id.startswith(SAVED))
        assert saved == case.saved_activations, case.name


def test_phase_peaks_to_the_byte() -> None:
    """Forward (at the loss), backward (at the loss's backward) and optimizer moments equal
    the measured phase peaks of step 1, for every case (LoRA included)."""
    for case in _cases():
        est = estimate(_exact(case))
        m = est.heaviest.moments

        assert m["forward"].low == case.phase_peak("forward"), case.name
        assert m["backward.start"].low == case.phase_peak("backward"), case.name
        assert m["optimizer"].low == case.phase_peak("optimizer"), case.name
        assert est.peak.low == case.peak_bytes, case.name


def test_autocast_weight_casts_and_fp32_residual() -> None:
    """SmolLM autocast, b 2: five 16-bit casts of norm outputs per layer (q, k, v, gate, up:
    5 · 2h = 5,760 B/token over pure bf16) and 16-bit copies of every linear weight
    (30 · 7,077,888 + tied lm_head 56,623,104 = 268,959,744 B)."""
    case = next(c for c in _cases() if "bf16_mixed" in c.name and not c.inputs["fsdp"])
    rows = {r.id: r for r in estimate(_exact(case)).rows}
    assert rows["hbm.activations.saved.weight_casts"].low == 268_959_744


def test_lora_frozen_base_saves_less_mlp() -> None:
    """With the base frozen, down_proj keeps no input and norms keep no normalised tensor,
    but PEFT's fp32 casts of the adapters' inputs add 3 · 4h per layer."""
    case = next(c for c in _cases() if c.lora)
    plan = _exact(case)
    full = with_value(plan, "method.kind", "full")
    lora_rows = activation_rows(plan, 0, 30, ())
    full_rows = activation_rows(full, 0, 30, ())
    lora = next(r for r in lora_rows if r.id == "hbm.activations.saved.layers").low
    base = next(r for r in full_rows if r.id == "hbm.activations.saved.layers").low
    assert lora != base
    assert "lora q A out" in next(r for r in lora_rows if r.id.endswith("layers")).formula


@pytest.mark.parametrize("attention", ["eager"])
def test_eager_attention_keeps_score_matrices(attention: str) -> None:
    """Eager attention keeps fp32 softmax + its 16-bit copy: (4 + 2)·a·s per token per layer;
    for SmolLM (a 9, s 2048) that is 110,592 B/token more than SDPA minus the lse (36)
    and plus the repeated K/V."""
    case = _cases()[1]
    sdpa = _exact(case)
    eager = with_value(sdpa, "runtime.attention", attention)
    a = next(r for r in activation_rows(sdpa, 0, 30, ()) if r.id.endswith("layers")).low
    b = next(r for r in activation_rows(eager, 0, 30, ()) if r.id.endswith("layers")).low
    per_token = (b - a) // (30 * 2048)
    # + softmax fp32 and bf16 (6·9·2048) + K,V repeated to 9 heads (2·2·(576−192))
    # − lse (4·9); o_proj's contiguous copy replaces the kernel's kept output
    assert per_token == 6 * 9 * 2048 + 2 * 2 * (576 - 192) - 36
