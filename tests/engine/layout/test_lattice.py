"""The TP × PP × CP × EP × DP lattice: hand-listed small cases and properties."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.layout.lattice import Layout, LayoutPreferences, enumerate_layouts
from engine.legality.rules import divisors
from engine.plan import Plan, default_plan, with_values

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

    Ordered factorisations of 4 = 2² into 5 factors: C(2+4, 4) = 15.
    EP > 1 needs experts: (ep=2: tp·pp·cp·dp = 2 → 4 ways) + (ep=4: 1) = 5 rejected.
    PP 4 exceeds 2 layers: 1 rejected (tp=cp=dp=1). TP 4 is legal: it divides the 4
    heads and is a multiple of the 2 KV heads (replicated), and fits a 4-GPU node.
    Legal: 15 − 6 = 9, listed below as (tp, pp, cp, dp).
    """
    lat = enumerate_layouts(tiny(), 4)
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
    assert len(reasons) == 6
    assert reasons[(1, 4, 1, 1, 1)] == (
        "parallelism.pp (4) exceeds the model's 2 layers (model.architecture.layers)",
    )
    assert reasons[(1, 1, 1, 4, 1)] == (
        "parallelism.ep (4) > 1 needs a mixture-of-experts model "
        "(model.architecture.moe is not set)",
    )
    assert sum("parallelism.ep (2) > 1 needs" in r[0] for r in reasons.values()) == 4
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
    # relaxed rules (arithmetic minimum) drop only the topology reasons
    lat = enumerate_layouts(tiny(**{"parallelism.dp": 3}), 3, LayoutPreferences().relaxed())
    r = next(x for x in lat.rejected if x.layout.tp == 3)
    assert r.reasons == (heads,)


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
    r = next(x for x in lat.rejected if x.layout.dp == 4 and x.layout.ep == 1)
    assert r.reasons[0].startswith("the global batch 2 (batch.global_batch) is not a multiple")
    # micro-batch held: the global batch follows DP
    lat = enumerate_layouts(tiny(), 4)
    assert {x.global_batch for x in lat.legal} == {1, 2, 4}


def test_cp_must_divide_sequence_and_pp_layers() -> None:
    """Sequence 6 on 4 GPUs: CP 4 does not divide 6; 3 layers: PP 2 does not divide 3."""
    plan = tiny(**{"batch.seq_len": 6, "model.architecture": {**TINY, "layers": 3}})
    lat = enumerate_layouts(plan, 4)
    texts = {s for r in lat.rejected for s in r.reasons}
    assert "parallelism.cp (4) must divide the sequence length 6 (batch.seq_len)" in texts
    assert "PP 2 does not divide the 3 layers (no explicit split given)" in texts


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=1, max_value=96))
def test_lattice_covers_every_factorisation(world: int) -> None:
    """Every layout multiplies to the world size; legal and rejected are disjoint and
    together number the ordered 5-factorisations (∑ over divisor chains)."""
    lat = enumerate_layouts(default_plan(), world)
    points = [(*x.shape, x.dp) for x in lat.legal] + [
        (*r.layout.shape, r.layout.dp) for r in lat.rejected
    ]
    assert len(points) == len(set(points))
    assert all(a * b * c * d * e == world for a, b, c, d, e in points)
    expected = sum(
        1
        for t in divisors(world)
        for p in divisors(world // t)
        for c in divisors(world // (t * p))
        for _ in divisors(world // (t * p * c))
    )
    assert len(points) == expected
    assert all(isinstance(x, Layout) and x.world_size == world for x in lat.legal)
