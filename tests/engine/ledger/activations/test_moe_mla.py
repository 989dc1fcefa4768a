"""Mixture-of-experts and multi-head latent attention in the activation model."""

from __future__ import annotations

from engine.ledger.activations.geometry import geometry, trainability
from engine.ledger.activations.hf import layer_terms
from engine.presets import plan_for_model_preset
from engine.stacks.defaults import resolved


def _widths(preset: str) -> dict[str, tuple[int, int, int]]:
    plan = resolved(plan_for_model_preset(preset))
    g, tr = geometry(plan), trainability(plan)
    terms = layer_terms(
        g, tr, mlp="swiglu", attention="sdpa_flash", selective=False, input_needs_grad=True
    )
    return {t.name: (t.width, t.bpe, t.count) for t in terms}


def test_mixtral_routes_each_token_through_two_experts() -> None:
    """Mixtral-8x7B: top-2 of 8 experts with I = 14,336 each, so a token's SwiGLU keeps
    gate, act(gate), up over 2 × 14,336 = 28,672 columns (×3) plus their product; the
    router keeps an fp32 softmax over 8 experts and 2 fp32 top-k weights per token, and
    each of the 2 experts keeps its own copy of the token's 4,096-wide hidden state
    (bf16: the default plan computes in bf16 under FSDP2)."""
    w = _widths("mixtral-8x7b")
    assert w["gate out, act(gate), up out"] == (28_672, 2, 3)  # bf16 compute under FSDP2

    assert w["router softmax fp32"] == (8, 4, 1)
    assert w["top-k routing weights fp32"] == (2, 4, 1)
    assert w["dispatched token copies (expert inputs)"][0::2] == (4_096, 2)


def test_qwen3_moe_width_is_top8_of_768() -> None:
    """Qwen3-30B-A3B: 8 of 128 experts with I = 768 → 6,144 columns per token."""
    w = _widths("qwen3-30b-a3b")
    assert w["gate out, act(gate), up out"][0] == 8 * 768
    assert w["router softmax fp32"][0] == 128


def test_deepseek_v3_mla_heads_and_latents() -> None:
    """DeepSeek-V3: q/k head dim 128 (no-rope) + 64 (rope) = 192 on all 128 heads
    (24,576), v head dim 128 (16,384); latents q 1,536 and kv 512 are normalised and
    kept as the up-projections' inputs; routed 8 × 2,048 + 1 shared × 2,048 = 18,432."""
    w = _widths("deepseek-v3")
    assert w["q (roped)"][0] == 24_576 and w["k (roped)"][0] == 24_576
    assert w["v"][0] == 16_384
    assert w["q latent normalised (up-projection input)"][0] == 1_536
    assert w["kv latent normalised (up-projection input)"][0] == 512
    assert w["gate out, act(gate), up out"][0] == 18_432
