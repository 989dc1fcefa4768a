"""A layer's saved terms are widths per token: none reads the micro-batch's size, so
``engine.ledger.activations.stage_layers._kind_terms`` builds them at one sequence and
shares them across micro-batch sizes (the window's batch edits, the fit search). Every
golden plan has a micro-batch of 1, so this is checked here: at micro-batches 2–8 the
terms built from the plan's own geometry (the layers' and the final norm's) equal the
shared ones, over presets (dense, MoE, MLA), both activation profiles, attention
kernels, recompute policies, methods, TP with and without sequence parallelism and CP —
and so do the stages' saved bytes and their description; and the backward working set's
term lists (``engine.ledger.activations.working._per_token``) likewise."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import PlanError
from engine.ledger.activations import hf, working
from engine.ledger.activations import megatron as mg
from engine.ledger.activations import torchtitan as tt
from engine.ledger.activations.geometry import geometry, trainability
from engine.ledger.activations.hf_moe import expert_terms as moe_expert_terms
from engine.ledger.activations.hf_moe import moe_shapes
from engine.ledger.activations.hf_moe import router_terms as moe_router_terms
from engine.ledger.activations.stage_layers import (
    context,
    counted_layers,
    final_norm_terms,
    layer_kind_terms,
    layer_walk,
)
from engine.ledger.activations.traits import traits_of
from engine.ledger.shape_free import shape_free
from engine.plan import with_values
from engine.presets import plan_for_model_preset
from engine.stacks.defaults import resolved


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(["llama-3.1-8b", "mixtral-8x7b", "deepseek-v3", "gemma-2-9b", "falcon-7b"]),
    st.sampled_from(["hf-transformers", "megatron", "torchtitan"]),
    st.sampled_from(["sdpa_flash", "sdpa_mem_efficient", "flash_attn", "flex", "eager"]),
    st.sampled_from(["none", "selective", "full", "every_k"]),
    st.sampled_from(["full", "lora"]),
    st.sampled_from([(1, False, 1), (2, True, 1), (4, False, 2)]),
    st.integers(2, 8),
)
def test_layer_terms_do_not_read_the_micro_batch(
    preset: str,
    profile: str,
    attention: str,
    recompute: str,
    method: str,
    tp_sp_cp: tuple[int, bool, int],
    micro_batch: int,
) -> None:
    tp, sp, cp = tp_sp_cp
    changes = {
        "runtime.activation_profile": profile,
        "runtime.attention": attention,
        "method.recompute.policy": recompute,
        "method.kind": method,
        "parallelism.tp": tp,
        "parallelism.sequence_parallel": sp,
        "parallelism.cp": cp,
        "batch.micro_batch": micro_batch,
    }
    try:
        plan = resolved(with_values(plan_for_model_preset(preset), changes))
    except (ValueError, PlanError):
        return
    g, tr = geometry(plan), trainability(plan)
    saved, _, _, _ = walk = layer_walk(plan, 0)
    kinds = tuple(k for k, _ in saved)
    args = (plan.model.architecture, tr, profile, attention, plan.method.recompute.policy)
    own = layer_kind_terms(args[0], g, *args[1:], kinds)
    one = g._replace(micro_batch=1)
    assert own == layer_kind_terms(args[0], one, *args[1:], kinds)
    sl = counted_layers(plan, walk)
    assert [(k.name, k.terms) for k in sl.kinds] == [(n, t) for n, t, _ in own]
    assert sl.describe(g) == counted_layers.__wrapped__(plan, walk).describe(g)
    own_final = (
        mg.final_terms(g)
        if profile == "megatron"
        else tt.final_norm_terms(g)
        if profile == "torchtitan"
        else hf.final_norm_terms(context(plan, g, tr))
    )
    assert final_norm_terms(plan, g) == tuple(own_final)


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(["llama-3.1-8b", "mixtral-8x7b", "deepseek-v3", "qwen1.5-moe-a2.7b"]),
    st.sampled_from(["fsdp2", "zero3", "megatron_distopt"]),
    st.sampled_from(["none", "full"]),
    st.sampled_from([(1, False), (2, True), (4, False)]),
    st.integers(2, 8),
)
def test_working_set_terms_do_not_read_the_micro_batch(
    preset: str, strategy: str, recompute: str, tp_sp: tuple[int, bool], micro_batch: int
) -> None:
    """The working set's term lists (``working._per_token``), built once per shape-free
    plan at one sequence, equal those built from the plan's own geometry."""
    tp, sp = tp_sp
    changes = {
        "parallelism.strategy": strategy,
        "method.recompute.policy": recompute,
        "parallelism.tp": tp,
        "parallelism.sequence_parallel": sp,
        "batch.micro_batch": micro_batch,
    }
    try:
        plan = resolved(with_values(plan_for_model_preset(preset), changes))
    except (ValueError, PlanError):
        return
    g, tr = geometry(plan), trainability(plan)
    free = shape_free(plan)
    own = {"work": working._dense_terms(plan, g)}
    arch = plan.model.architecture
    if working._moe_combine(plan, True):  # else an MoE layer works as a dense one
        own["moe_work"] = working.moe_working_terms(plan, g)
    if arch.moe is not None:
        m, t = moe_shapes(arch.moe, g.tp), traits_of(arch)
        own["after_experts"] = working.after_experts_terms(plan, g)
        own["moe_saved"] = hf.moe_mlp_terms(context(plan, g, tr))
        own["routed"] = moe_router_terms(g, tr, t, m) + moe_expert_terms(g, tr, t, m)
    for which, terms in own.items():
        assert working._per_token(free, g.seq, which) == tuple(terms), which
