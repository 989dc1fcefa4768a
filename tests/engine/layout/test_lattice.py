"""The TP × PP × CP × DP lattice with EP folded over it: hand-listed small cases and
properties."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.layout.shapes import Layout, LayoutPreferences, enumerate_layouts, legal_shapes
from engine.legality.rules import divisors
from engine.plan import Plan, default_plan, with_values
from engine.presets import plan_for_model_preset

TINY = {
    "family": "llama",
    "hidden": 64,
    "layers": 2,
    "heads": 4,
    "kv_heads": 2,
    "intermediate": 128,
    "vocab": 100,
}


def tiny(**extra: object) -> Plan:
    changes: dict[str, object] = {
        "model.architecture": TINY,
        "batch.seq_len": 4,
        "hardware.gpus_per_node": 4,
        "parallelism.dp": 4,
    }
    changes.update(extra)
    return with_values(default_plan(), changes)


def test_world_4_every_layout_listed_by_hand() -> None:
    """4 GPUs, 4 heads / 2 KV heads, 2 layers, sequence 4, a dense model, 4 per node.

    Ordered factorisations of 4 = 2² into the 4 factors TP × PP × CP × DP:
    C(2+3, 3) = 10. A dense model has EP 1 only (nothing to reject for it).
    PP 4 exceeds 2 layers: 1 rejected (tp=cp=dp=1). TP 4 is legal: it divides the 4
    heads and is a multiple of the 2 KV heads (replicated), and fits a 4-GPU node.
    Legal: 10 − 1 = 9, listed below as (tp, pp, cp, dp). (CP's chunk-size preference
    is lowered to 1 token: a 4-token sequence has no 1,024-token chunks.)
    """
    lat = enumerate_layouts(tiny(), 4, LayoutPreferences(cp_min_tokens=1))
    legal = {(x.tp, x.pp, x.cp, x.dp) for x in lat.legal}
    assert legal == {
        (1, 1, 1, 4),
        (1, 1, 2, 2),
        (1, 1, 4, 1),
        (1, 2, 1, 2),
        (1, 2, 2, 1),
        (2, 1, 1, 2),
        (2, 1, 2, 1),
        (2, 2, 1, 1),
        (4, 1, 1, 1),
    }
    assert all(x.ep == 1 for x in lat.legal)
    reasons = {
        (r.layout.tp, r.layout.pp, r.layout.cp, r.layout.ep, r.layout.dp): r.reasons
        for r in lat.rejected
    }
    assert len(reasons) == 1
    assert reasons[(1, 4, 1, 1, 1)] == (
        "parallelism.pp (4) exceeds the model's 2 layers (model.architecture.layers)",
    )
    # preference: least model parallelism first
    assert (lat.legal[0].tp, lat.legal[0].dp) == (1, 4)


def test_rules_and_preferences_reject_with_reasons() -> None:
    """Without KV replication TP 4 is not preferred for the 2 KV heads; with 2 GPUs per
    node TP 4 leaves the node; TP 3 (world 3) divides neither 4 heads nor is a power of
    two. Relaxing the preferences leaves only the hard rule (legality's wording)."""
    lat = enumerate_layouts(tiny(), 4, LayoutPreferences(kv_replication=False))
    r = next(x for x in lat.rejected if x.layout.tp == 4)
    assert "KV heads" in r.reasons[0]
    lat = enumerate_layouts(tiny(**{"hardware.gpus_per_node": 2}), 4)
    r = next(x for x in lat.rejected if x.layout.tp == 4)
    assert r.reasons == ("TP 4 does not fit evenly inside one node of 2 GPUs",)
    lat = enumerate_layouts(tiny(**{"parallelism.dp": 3}), 3)
    r = next(x for x in lat.rejected if x.layout.tp == 3)
    heads = "parallelism.tp (3) must divide the 4 attention heads (model.architecture.heads)"
    assert heads in r.reasons
    assert "TP 3 is not a power of two" in r.reasons
    assert "TP 3 does not fit evenly inside one node of 4 GPUs" in r.reasons
    # relaxed rules (arithmetic minimum) drop only the power-of-two preference: TP stays
    # within a node, where every stack runs it
    lat = enumerate_layouts(tiny(**{"parallelism.dp": 3}), 3, LayoutPreferences().relaxed())
    r = next(x for x in lat.rejected if x.layout.tp == 3)
    assert r.reasons == (heads, "TP 3 does not fit evenly inside one node of 4 GPUs")


def test_global_batch_held_fixed() -> None:
    """Global batch 2 held, micro-batch 1: DP 4 would need 4 sequences per step → rejected;
    DP 2 takes accumulation 1, DP 1 accumulation 2."""
    plan = tiny(
        **{"batch.hold_fixed": "global_batch", "batch.global_batch": 2, "parallelism.dp": 2}
    )
    lat = enumerate_layouts(plan, 4)
    by = {(x.tp, x.pp, x.cp, x.dp): x for x in lat.legal}
    assert by[(2, 1, 1, 2)].grad_accum == 1
    assert by[(4, 1, 1, 1)].grad_accum == 2
    assert all(x.global_batch == 2 for x in lat.legal)
    r = next(x for x in lat.rejected if x.layout.dp == 4)
    assert r.reasons[0].startswith("the global batch 2 (batch.global_batch) is not a multiple")
    # micro-batch held: the global batch follows DP
    lat = enumerate_layouts(tiny(), 4)
    assert {x.global_batch for x in lat.legal} == {1, 2, 4}


def test_cp_must_divide_sequence_and_pp_gets_the_weighted_split() -> None:
    """Sequence 6 on 4 GPUs: CP 4 does not divide 6. 3 layers on PP 2 are no longer
    refused: the default split policy counts the embedding and the output layer as one
    layer each (torchtitan's default), 3 + 2 = 5 units → 3 and 2 → 2 and 1 layers."""
    plan = tiny(**{"batch.seq_len": 6, "model.architecture": {**TINY, "layers": 3}})
    lat = enumerate_layouts(plan, 4)
    texts = {s for r in lat.rejected for s in r.reasons}
    assert "parallelism.cp (4) must divide the sequence length 6 (batch.seq_len)" in texts
    pp2 = [x for x in lat.legal if x.pp == 2]
    assert pp2 and all(x.pp_split == (2, 1) for x in pp2)
    assert "PP2 [2,1]" in pp2[0].label()


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=1, max_value=96))
def test_lattice_covers_every_factorisation(world: int) -> None:
    """Every layout multiplies to the world size (TP × PP × CP × DP; EP folds in);
    legal and rejected are disjoint and together number the ordered 4-factorisations
    (∑ over divisor chains) of a dense model, which has EP 1 only."""
    lat = enumerate_layouts(default_plan(), world)
    points = [(*x.shape, x.dp) for x in lat.legal] + [
        (*r.layout.shape, r.layout.dp) for r in lat.rejected
    ]
    assert len(points) == len(set(points))
    assert all(a * b * c * e == world and d == 1 for a, b, c, d, e in points)
    expected = sum(
        1 for t in divisors(world) for p in divisors(world // t) for _ in divisors(world // (t * p))
    )
    assert len(points) == expected
    assert all(isinstance(x, Layout) and x.world_size == world for x in lat.legal)


TINY_MOE = {
    **TINY,
    "family": "mixtral",
    "moe": {"num_experts": 4, "top_k": 2, "expert_intermediate": 64},
}


def test_moe_ep_folds_over_tp_cp_dp() -> None:
    """A 4-expert model on 4 GPUs (one layer per stage at most 2 stages): EP ∈ {1, 2, 4}
    folds over the TP × CP × DP ranks of a stage (Megatron-Core
    ``parallel_state.initialize_model_parallel``: the world must divide by
    ETP × EP × PP). With expert TP 1: TP1 PP1 CP1 DP4 takes EP 1, 2, 4; TP2 PP2 DP1 has
    2 ranks per stage, so EP 4 is refused and EP 2 folds over the TP pair; PP 2 DP 2
    takes EP 2 but not 4. The world is TP × PP × CP × DP whatever the EP."""
    plan = tiny(**{"model.architecture": TINY_MOE})
    lat = enumerate_layouts(plan, 4)
    legal = {(x.tp, x.pp, x.cp, x.ep, x.dp) for x in lat.legal}
    assert {(1, 1, 1, e, 4) for e in (1, 2, 4)} <= legal
    assert (2, 2, 1, 2, 1) in legal and (2, 2, 1, 4, 1) not in legal
    assert (1, 2, 1, 2, 2) in legal and (1, 2, 1, 4, 2) not in legal
    assert all(x.world_size == 4 for x in lat.legal)
    r = next(x for x in lat.rejected if (x.layout.tp, x.layout.pp, x.layout.ep) == (2, 2, 4))
    assert r.reasons == (
        "parallelism.ep × parallelism.expert_tp = 4 × 1 = 4 must divide the 2 ranks of a "
        "pipeline stage (parallelism.tp × parallelism.cp × parallelism.dp): expert "
        "parallelism folds over those ranks",
    )


def test_search_shapes_come_in_preference_order() -> None:
    """legal_shapes sorts by a plain tuple of Layout.preference's key: the same order on
    presets whose shapes tie on model parallelism across PP, CP and TP (a MoE model's
    EPs too), under the practical and the relaxed preferences."""
    for name in ("deepseek-v2", "llama-3.1-405b"):
        plan = plan_for_model_preset(name)
        for prefs in (LayoutPreferences(), LayoutPreferences().relaxed()):
            shapes = legal_shapes(plan, 16384, prefs)
            assert len({s.preference() for s in shapes}) == len(shapes) > 100
            assert shapes == sorted(shapes, key=Layout.preference)
            assert len({(s.pp, s.cp) for s in shapes if s.model_parallel == 16}) > 2
