"""Hypothesis properties of the inventory: monotone, additive, and exact differences."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.models.inventory import build_inventory, total_params
from engine.models.roles import tp_split_dim
from engine.models.spec import ArchitectureSpec, MoESpec
from engine.models.summary import summarize

FAMILIES = ["llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3", "phi3"]


@st.composite
def dense_specs(draw: st.DrawFn) -> ArchitectureSpec:
    kv = draw(st.integers(1, 4))
    heads = kv * draw(st.integers(1, 4))
    fused = draw(st.booleans())
    fields: dict[str, Any] = dict(
        family=draw(st.sampled_from(FAMILIES)),
        hidden=draw(st.integers(1, 64)),
        layers=draw(st.integers(1, 6)),
        heads=heads,
        kv_heads=kv,
        head_dim=draw(st.integers(1, 16)),
        intermediate=draw(st.integers(1, 64)),
        vocab=draw(st.integers(1, 200)),
        tied_embeddings=draw(st.booleans()),
        qkv_bias=draw(st.booleans()),
        o_bias=draw(st.booleans()),
        mlp_bias=draw(st.booleans()),
        qk_norm=draw(st.booleans()),
        sandwich_norm=draw(st.booleans()),
        fused_qkv=fused,
        fused_gate_up=fused,
        norm=draw(st.sampled_from(["rmsnorm", "layernorm"])),
        norm_bias=draw(st.booleans()),
    )
    if draw(st.booleans()):
        fields["moe"] = MoESpec(
            num_experts=draw(st.integers(2, 8)),
            top_k=1,
            expert_intermediate=draw(st.integers(1, 16)),
            shared_experts=draw(st.integers(0, 2)),
            first_dense_layers=draw(st.integers(0, fields["layers"])),
        )
        fields["family"] = "qwen3_moe"
    return ArchitectureSpec(**fields)


def _total(spec: ArchitectureSpec) -> int:
    return total_params(build_inventory(spec))


@settings(max_examples=150, deadline=None)
@given(dense_specs(), st.integers(1, 4))
def test_more_layers_never_fewer_params(spec: ArchitectureSpec, extra: int) -> None:
    """Adding layers appends whole layers: the total rises by exactly their sum."""
    bigger = spec.model_copy(update={"layers": spec.layers + extra})
    assert _total(bigger) > _total(spec)
    last = [r for r in summarize(bigger).rows if r.layer is not None][-1]
    if spec.moe is None or spec.layers >= spec.moe.first_dense_layers:
        assert _total(bigger) - _total(spec) == extra * last.params


@settings(max_examples=150, deadline=None)
@given(dense_specs())
def test_tying_removes_exactly_v_times_h(spec: ArchitectureSpec) -> None:
    """Untied minus tied = the lm_head matrix V·h (plus nothing else; no head bias here)."""
    tied = spec.model_copy(update={"tied_embeddings": True})
    untied = spec.model_copy(update={"tied_embeddings": False})
    assert _total(untied) - _total(tied) == spec.vocab * spec.hidden


@settings(max_examples=150, deadline=None)
@given(dense_specs(), st.integers(1, 3))
def test_kv_heads_cost_two_projections(spec: ArchitectureSpec, factor: int) -> None:
    """Scaling heads and kv heads by f widens q by Δq = (f−1)·a·d and k, v by Δkv = (f−1)·k·d.

    Per layer: q/k/v weights (Δq + 2Δkv)·h, their biases Δq + 2Δkv when present, and the
    output projection Δq·h; head_dim is unchanged, so q/k norms and o's bias are too.
    """
    wider = spec.model_copy(
        update={"heads": spec.heads * factor, "kv_heads": spec.kv_heads * factor}
    )
    d, h = spec.dim_per_head, spec.hidden
    dq, dkv = (factor - 1) * spec.heads * d, (factor - 1) * spec.kv_heads * d
    per_layer = (dq + 2 * dkv) * (h + (1 if spec.qkv_bias else 0)) + dq * h
    assert _total(wider) - _total(spec) == spec.layers * per_layer


@settings(max_examples=100, deadline=None)
@given(dense_specs())
def test_inventory_invariants(spec: ArchitectureSpec) -> None:
    """Unique names, positive sizes, summary rows sum to the total, active ≤ total."""
    inv = build_inventory(spec)
    assert len({t.name for t in inv}) == len(inv)
    assert all(t.numel > 0 for t in inv)
    s = summarize(spec)
    assert sum(r.params for r in s.rows) == s.total == total_params(inv)
    assert s.embedding + s.non_embedding == s.total
    assert s.active_per_token <= s.total
    assert (s.active_per_token == s.total) == (
        spec.moe is None
        or spec.moe.top_k == spec.moe.num_experts
        or spec.moe.first_dense_layers == spec.layers
    )
    for t in inv:
        dim = tp_split_dim(t)
        assert dim is None or dim < len(t.shape)


@settings(max_examples=100, deadline=None)
@given(dense_specs())
def test_one_more_expert_adds_one_expert_per_moe_layer(spec: ArchitectureSpec) -> None:
    """E+1 experts add one expert (3·h·I_e) and one router row (h) per MoE layer."""
    if spec.moe is None:
        return
    moe = spec.moe
    more = spec.model_copy(
        update={"moe": moe.model_copy(update={"num_experts": moe.num_experts + 1})}
    )
    moe_layers = spec.layers - moe.first_dense_layers
    per_expert = 3 * spec.hidden * moe.expert_intermediate + (
        (2 * moe.expert_intermediate + spec.hidden) if spec.mlp_bias else 0
    )
    assert _total(more) - _total(spec) == moe_layers * (per_expert + spec.hidden)
