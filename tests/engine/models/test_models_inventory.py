"""Hand-built tiny architectures whose every tensor is checked by name, shape and role."""

from __future__ import annotations

from dataclasses import replace

from engine.models.inventory import build_inventory, stored_dtype, total_params
from engine.models.layouts import family_layout
from engine.models.roles import is_embedding, is_expert_parallel, role_info, tp_split_dim
from engine.models.spec import ArchitectureSpec, MLASpec, MoESpec
from engine.models.summary import summarize
from engine.models.tensor import Role
from engine.presets import plan_for_model_preset

TINY_QWEN3 = ArchitectureSpec(
    family="qwen3",
    hidden=8,
    layers=2,
    heads=4,
    kv_heads=2,
    head_dim=3,
    intermediate=5,
    vocab=11,
    qkv_bias=True,
    qk_norm=True,
)


def test_tiny_qwen3_every_tensor() -> None:
    """h=8, L=2, a=4, k=2, d=3 (≠ h/a), I=5, V=11, q/k/v biases, q/k norms, untied.

    q out 4·3 = 12, k/v out 2·3 = 6. Per layer: norm 8 + q 96 + 12 + k 48 + 6 + v 48 + 6
    + o 8·12 = 96 + q_norm 3 + k_norm 3 + norm 8 + gate 40 + up 40 + down 40 = 454.
    Total 11·8 + 2·454 + 8 + 11·8 = 1,092.
    """
    expected: list[tuple[str, tuple[int, ...], str, int | None]] = [
        ("model.embed_tokens.weight", (11, 8), "embedding", None)
    ]
    for i in range(2):
        p = f"model.layers.{i}"
        expected += [
            (f"{p}.input_layernorm.weight", (8,), "norm", i),
            (f"{p}.self_attn.q_proj.weight", (12, 8), "q", i),
            (f"{p}.self_attn.q_proj.bias", (12,), "q", i),
            (f"{p}.self_attn.k_proj.weight", (6, 8), "k", i),
            (f"{p}.self_attn.k_proj.bias", (6,), "k", i),
            (f"{p}.self_attn.v_proj.weight", (6, 8), "v", i),
            (f"{p}.self_attn.v_proj.bias", (6,), "v", i),
            (f"{p}.self_attn.o_proj.weight", (8, 12), "o", i),
            (f"{p}.self_attn.q_norm.weight", (3,), "qk_norm", i),
            (f"{p}.self_attn.k_norm.weight", (3,), "qk_norm", i),
            (f"{p}.post_attention_layernorm.weight", (8,), "norm", i),
            (f"{p}.mlp.gate_proj.weight", (5, 8), "gate", i),
            (f"{p}.mlp.up_proj.weight", (5, 8), "up", i),
            (f"{p}.mlp.down_proj.weight", (8, 5), "down", i),
        ]
    expected += [
        ("model.norm.weight", (8,), "final_norm", None),
        ("lm_head.weight", (11, 8), "lm_head", None),
    ]
    inv = build_inventory(TINY_QWEN3)
    assert [(t.name, t.shape, t.role, t.layer) for t in inv] == expected
    assert total_params(inv) == 1_092
    assert all(t.dtype == "bf16" for t in inv)


def test_tiny_gpt2_every_tensor() -> None:
    """GPT-2 layout, h=4, L=1, a=2, I=16, V=7, 5 positions, tied.

    Conv1D weights are stored (in, out): the logical shape is (out, in). Total
    wte 28 + wpe 20 + ln_1 8 + c_attn 48+12 + c_proj 16+4 + ln_2 8 + c_fc 64+16
    + c_proj 64+4 + ln_f 8 = 300.
    """
    spec = ArchitectureSpec(
        family="gpt2",
        hidden=4,
        layers=1,
        heads=2,
        kv_heads=2,
        intermediate=16,
        vocab=7,
        max_position=5,
        tied_embeddings=True,
        mlp="gelu",
        norm="layernorm",
        norm_bias=True,
        qkv_bias=True,
        o_bias=True,
        mlp_bias=True,
        fused_qkv=True,
        position="learned",
        stored_dtype="fp32",
    )
    rows = [(t.name, t.stored_shape, t.role) for t in build_inventory(spec)]
    assert rows == [
        ("wte.weight", (7, 4), "embedding"),
        ("wpe.weight", (5, 4), "position_embedding"),
        ("h.0.ln_1.weight", (4,), "norm"),
        ("h.0.ln_1.bias", (4,), "norm"),
        ("h.0.attn.c_attn.weight", (4, 12), "qkv"),
        ("h.0.attn.c_attn.bias", (12,), "qkv"),
        ("h.0.attn.c_proj.weight", (4, 4), "o"),
        ("h.0.attn.c_proj.bias", (4,), "o"),
        ("h.0.ln_2.weight", (4,), "norm"),
        ("h.0.ln_2.bias", (4,), "norm"),
        ("h.0.mlp.c_fc.weight", (4, 16), "up"),
        ("h.0.mlp.c_fc.bias", (16,), "up"),
        ("h.0.mlp.c_proj.weight", (16, 4), "down"),
        ("h.0.mlp.c_proj.bias", (4,), "down"),
        ("ln_f.weight", (4,), "final_norm"),
        ("ln_f.bias", (4,), "final_norm"),
    ]
    inv = build_inventory(spec)
    assert inv[4].shape == (12, 4) and inv[4].stored_transposed
    assert total_params(inv) == 300


TINY_DSV3 = ArchitectureSpec(
    family="deepseek_v3",
    hidden=16,
    layers=3,
    heads=2,
    kv_heads=2,
    intermediate=20,
    vocab=10,
    moe=MoESpec(
        num_experts=4,
        top_k=2,
        expert_intermediate=3,
        shared_experts=1,
        shared_intermediate=3,
        first_dense_layers=1,
        router_bias=True,
    ),
    mla=MLASpec(
        q_lora_rank=4, kv_lora_rank=3, qk_nope_head_dim=2, qk_rope_head_dim=1, v_head_dim=2
    ),
    mtp_layers=1,
    stored_dtype="fp8_e4m3",
)


def test_tiny_deepseek_layers() -> None:
    """MLA + dense first layer + MoE with shared expert + MTP, h=16, a=2, V=10.

    Attention: q_a 4·16=64 + norm 4 + q_b (2·3)·4=24 + kv_a (3+1)·16=64 + norm 3
    + kv_b (2·(2+2))·3=24 + o 16·(2·2)=64 → 247. Norms 2·16 = 32.
    Dense layer: 247 + 32 + 3·16·20 = 1,239.
    MoE layer: 247 + 32 + router 4·16 + bias 4 + (4 routed + 1 shared)·3·16·3 = 1,067.
    Main: embed 160 + 1,239 + 2·1,067 + norm 16 + head 160 = 3,709.
    MTP (its embedding and head are the main model's, not counted again): enorm 16
    + hnorm 16 + eh_proj 16·32=512 + 1,067 + head norm 16 = 1,627. Total 5,336.
    Active: each MoE layer uses 2 of 4 routed experts (−2·144).
    """
    inv = build_inventory(TINY_DSV3)
    by = {t.name: t for t in inv}
    assert by["model.layers.0.mlp.down_proj.weight"].shape == (16, 20)
    assert by["model.layers.1.self_attn.q_b_proj.weight"].shape == (6, 4)
    assert by["model.layers.1.self_attn.kv_a_proj_with_mqa.weight"].shape == (4, 16)
    assert by["model.layers.1.self_attn.kv_b_proj.weight"].shape == (8, 3)
    assert by["model.layers.1.self_attn.o_proj.weight"].shape == (16, 4)
    assert by["model.layers.2.mlp.experts.3.down_proj.weight"].expert == 3
    assert by["model.layers.2.mlp.shared_experts.up_proj.weight"].role == "shared_up"
    assert by["model.layers.2.mlp.gate.e_score_correction_bias"].dtype == "fp32"
    assert by["model.layers.2.mlp.gate.weight"].dtype == "bf16"
    assert by["model.layers.1.self_attn.q_a_proj.weight"].dtype == "fp8_e4m3"
    assert by["model.embed_tokens.weight"].dtype == "bf16"
    mtp = by["model.layers.3.eh_proj.weight"]
    assert (mtp.shape, mtp.module, mtp.layer, mtp.dtype) == ((16, 32), "mtp", None, "bf16")
    assert by["model.layers.3.mlp.experts.0.gate_proj.weight"].module == "mtp"
    assert "model.layers.3.embed_tokens.weight" not in by
    assert "model.layers.3.shared_head.head.weight" not in by
    s = summarize(TINY_DSV3)
    assert s.main_model == 3_709 and s.mtp == 1_627 and s.total == 5_336
    assert s.active_per_token == 5_336 - 3 * 2 * 144
    assert s.main_active_per_token == 3_709 - 2 * 2 * 144
    assert s.embedding == 2 * 160
    assert [r.kind for r in s.rows] == ["dense", "moe", "moe", "mtp", "root"]
    assert s.largest_layer.unit == "layer 0" and s.largest_layer.params == 1_239
    off = summarize(TINY_DSV3.model_copy(update={"mtp_layers": 0}))
    assert off.total == off.main_model == 3_709 and off.mtp == 0


def test_mixtral_names_experts_w1_w3_w2() -> None:
    spec = ArchitectureSpec(
        family="mixtral",
        hidden=8,
        layers=1,
        heads=2,
        kv_heads=1,
        intermediate=4,
        vocab=5,
        moe=MoESpec(num_experts=2, top_k=1, expert_intermediate=4),
    )
    names = [t.name for t in build_inventory(spec) if t.layer == 0]
    assert "model.layers.0.block_sparse_moe.gate.weight" in names
    assert "model.layers.0.block_sparse_moe.experts.1.w1.weight" in names
    assert "model.layers.0.block_sparse_moe.experts.1.w3.weight" in names
    assert "model.layers.0.block_sparse_moe.experts.1.w2.weight" in names


def test_roles_table() -> None:
    """Column-parallel split dim 0, row-parallel dim 1, vocab dim 0, the rest replicated."""
    column: tuple[Role, ...] = (
        "q",
        "k",
        "v",
        "qkv",
        "gate",
        "up",
        "gate_up",
        "expert_gate",
        "expert_up",
        "shared_gate",
        "shared_up",
        "q_b",
        "kv_b",
        "embedding",
        "lm_head",
    )
    row: tuple[Role, ...] = ("o", "down", "expert_down", "shared_down")
    replicated: tuple[Role, ...] = (
        "norm",
        "qk_norm",
        "router",
        "final_norm",
        "q_a",
        "kv_a",
        "latent_norm",
    )
    for role in column:
        assert role_info(role).tp_split_dim == 0, role
    for role in row:
        assert role_info(role).tp_split_dim == 1, role
    for role in replicated:
        assert role_info(role).tp_split_dim is None, role
    assert role_info("expert_down").expert_parallel
    assert not role_info("shared_down").expert_parallel
    assert role_info("position_embedding").embedding and not role_info("q").embedding
    inv = build_inventory(TINY_QWEN3)
    o_weight = next(t for t in inv if t.name.endswith("o_proj.weight"))
    q_bias = next(t for t in inv if t.name.endswith("q_proj.bias"))
    assert tp_split_dim(o_weight) == 1 and tp_split_dim(q_bias) == 0
    assert sum(t.numel for t in inv if is_embedding(t)) == 2 * 88
    assert not any(is_expert_parallel(t) for t in inv)


def test_inventory_is_cached() -> None:
    """Frozen specs hash, so the same spec returns the very same tuple."""
    assert build_inventory(TINY_DSV3) is build_inventory(TINY_DSV3.model_copy())


def test_summary_dense() -> None:
    s = summarize(TINY_QWEN3)
    assert s.total == s.trainable == s.active_per_token == 1_092
    assert s.embedding == 176 and s.non_embedding == 916
    assert s.largest_layer.params == 454 and s.largest_unit.unit == "layer 0"  # root: 184
    assert s.by_dtype == {"bf16": 1_092}
    assert sum(r.params for r in s.rows) == s.total


def test_stamping_a_stored_dtype_changes_the_dtype_alone() -> None:
    """The inventory stamps each tensor's stored dtype by building it field by field
    (``inventory._stamped``, faster than ``dataclasses.replace``): on DeepSeek-V3's FP8
    checkpoint, where 2-D weights become fp8_e4m3 and the rest stay 16-bit, every
    stamped tensor equals ``replace(raw, dtype=…)`` of the layout's own tensor — so a
    field added to ``Tensor`` out of order would show here."""
    spec = plan_for_model_preset("deepseek-v3").model.architecture
    raw = tuple(family_layout(spec))
    stamped = build_inventory(spec)
    assert len(raw) == len(stamped)
    changed = 0
    for r, t in zip(raw, stamped, strict=True):
        want = stored_dtype(spec, r)
        assert t == replace(r, dtype=want)
        changed += want != r.dtype
    assert changed > 40_000  # 58 MoE layers × 768 expert matrices alone are 44,544
