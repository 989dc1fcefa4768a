"""Mixture-of-experts and multi-head latent attention in the activation model."""

from __future__ import annotations

from engine.ledger.activations import hf
from engine.ledger.activations.geometry import geometry, trainability
from engine.ledger.activations.stage_layers import context, stage_layers
from engine.presets import plan_for_model_preset
from engine.stacks.defaults import resolved


def _widths(preset: str, moe_layer: bool = True) -> dict[str, tuple[int, int, int]]:
    plan = resolved(plan_for_model_preset(preset))
    g, tr = geometry(plan), trainability(plan)
    arch = plan.model.architecture
    terms = hf.layer_terms(
        context(plan, g, tr), moe_layer=moe_layer, dense_width=hf.dense_width(arch, 1), ing=True
    )
    return {t.name: (t.width, t.bpe, t.count) for t in terms}


def test_mixtral_grouped_mm_keeps_each_pair() -> None:
    """Mixtral-8x7B (transformers 5.24 grouped_mm_experts_forward): top-2 of 8 experts,
    I = 14,336, h = 4,096, bf16 (the default plan computes in bf16 under FSDP2). Per
    token 2 (token, expert) pairs: the gathered inputs 2 × 4,096, the up projection's
    output 2 × 2 × 14,336, the activation and the product 2 × 14,336 each, each expert's
    output 2 × 4,096 (kept for the routing-weight multiply); three int64 indices per pair
    and the fp32 routing weight; the router keeps its fp32 softmax over 8, the top-2
    indices, and (Mixtral re-normalises in place) the sum and the weights."""
    w = _widths("mixtral-8x7b")
    assert w["gathered token copies (expert inputs)"] == (8_192, 2, 1)
    assert w["expert gate_up out (act, product inputs)"] == (57_344, 2, 1)
    assert w["expert act out"] == (28_672, 2, 1)
    assert w["expert product (down input)"] == (28_672, 2, 1)
    assert w["expert outputs (kept for the routing-weight multiply)"] == (8_192, 2, 1)
    assert w["dispatch indices int64 (perm // k, perm, inverse)"] == (2, 8, 3)
    assert w["routing weights per pair"] == (2, 4, 1)
    assert w["router softmax fp32"] == (8, 4, 1)
    assert w["top-k weights fp32"] == (2, 4, 1)


def test_qwen3_moe_routes_top8_of_128_with_bf16_weights() -> None:
    """Qwen3-30B-A3B: 8 of 128 experts of I = 768 → 8 · 2 · 768 = 12,288 up-projection
    outputs per token; its router casts the routing weights to the compute dtype."""
    w = _widths("qwen3-30b-a3b")
    assert w["expert gate_up out (act, product inputs)"][0] == 12_288
    assert w["router softmax fp32"][0] == 128
    assert w["routing weights per pair"] == (8, 2, 1)


def test_deepseek_v3_mla_heads_and_latents() -> None:
    """DeepSeek-V3: q/k head dim 128 (no-rope) + 64 (rope) = 192 on all 128 heads
    (24,576); v is a view of kv_b_proj's output, 128 × (128 + 128) = 32,768; latents q
    1,536 and kv 512 keep their norms and the up-projections' inputs; the router copies
    its input to fp32 (7,168 × 4 B). v's head dim (128) differs from q's (192), so flash
    is ruled out (torch ``sdp_utils.cpp`` ``check_head_dim_size_flash`` wants one head dim)
    and the memory-efficient kernel runs: its output is allocated (b, s, h, d)
    (``_efficient_attention_forward``), so o_proj's ``transpose(1, 2).reshape`` is a view
    and no output copy is kept — the output itself, 128 × 128 = 16,384, is."""
    w = _widths("deepseek-v3")
    assert w["q (cat of q_nope, roped q_rot)"][0] == 24_576
    assert w["k (k_nope and the shared roped k_rot, copied per head)"][0] == 24_576
    assert w["v: a view of kv_b_proj's output"][0] == 32_768
    assert "attn output copy (o_proj input)" not in w
    assert w["attn output"][0] == 16_384
    assert w["q latent out"][0] == 1_536 and w["kv latent out"][0] == 512
    assert w["router fp32 input copy"] == (7_168, 4, 1)


def test_deepseek_v3_dense_first_layers_use_the_dense_width() -> None:
    """DeepSeek-V3's first 3 layers are dense MLPs of I = 18,432, the other 58 MoE:
    the stage counts two kinds, with the dense layers' own width."""
    plan = resolved(plan_for_model_preset("deepseek-v3"))
    sl = stage_layers(plan, 0)
    saved = {k.name: k.saved for k in sl.kinds}
    assert saved == {"dense": 3, "MoE": 58}
    dense = _widths("deepseek-v3", moe_layer=False)
    assert dense["mlp gate out, act(gate), up out"] == (18_432, 2, 3)
