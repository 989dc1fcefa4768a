"""The layout lattice and search admit exactly what engine.legality admits.

On small random models, batches, offloads and world sizes: a layout the lattice calls
legal (hard rules only) is one whose derived plan has no problem, and a rejected one
carries exactly the derived plan's messages; the shapes and DP values the search
enumerates are exactly those passing the rules.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from legality_plans import MOE, NO_PREFERENCES, tiny, tiny_changes

from engine.layout.shapes import (
    Layout,
    LayoutPreferences,
    candidate_pipeline,
    enumerate_layouts,
    legal_shapes,
    with_layout,
)
from engine.legality import rules
from engine.legality.checks import plan_problems, rule_problems
from engine.legality.stack import dimension_problems
from engine.plan import Plan, default_plan, with_values
from engine.stacks.catalog import concrete_stack

OFFLOADS = [
    ("fsdp2", "none", "none"),
    ("zero3", "cpu", "cpu"),
    ("ddp", "none", "cpu"),
    ("zero2", "cpu", "none"),
]
"""Legal and illegal offloads: a refused one must reject every layout alike."""


@st.composite
def small_plans(draw: st.DrawFn, hold_micro_only: bool = False) -> Plan:
    """A loadable plan of a tiny model; whatever estimate() thinks of it.

    When the global batch is held it is given explicitly: the lattice then holds that
    number, and the plans it derives carry it (an implied one they would drop).
    """
    kv = draw(st.sampled_from([1, 2, 3]))
    layers = draw(st.integers(1, 6))
    arch: dict[str, Any] = {
        "heads": kv * draw(st.integers(1, 4)),
        "kv_heads": kv,
        "head_dim": 8,
        "layers": layers,
    }
    experts = draw(st.sampled_from([None, 2, 3, 4, 6]))
    if experts:
        moe = {"num_experts": experts, "top_k": 1, "expert_intermediate": 32}
        arch.update(family="mixtral", moe=moe)
    pp = draw(st.integers(1, layers))
    v = draw(st.sampled_from([1, 2]))
    dp = draw(st.integers(1, 6))
    hold = (
        "micro_batch" if hold_micro_only else draw(st.sampled_from(["micro_batch", "global_batch"]))
    )
    strategy, params, optimizer = draw(st.sampled_from(OFFLOADS))
    changes = {
        "parallelism.pp": pp,
        "parallelism.virtual_stages": v,
        "parallelism.pp_schedule": "interleaved_1f1b" if v > 1 else "1f1b",
        "parallelism.dp": dp,
        "parallelism.strategy": strategy,
        "offload.params": params,
        "offload.optimizer": optimizer,
        "batch.seq_len": draw(st.integers(1, 12)),
        "batch.micro_batch": draw(st.integers(1, 3)),
        "batch.hold_fixed": hold,
    }
    if not hold_micro_only:
        sg = draw(st.none() | st.sampled_from(rules.divisors(dp)))
        gb = draw(st.integers(1, 24))
        changes["parallelism.shard_group_size"] = sg
        changes["batch.global_batch"] = (
            gb if hold == "global_batch" else draw(st.none() | st.just(gb))
        )
    if draw(st.booleans()):
        base, extra = divmod(layers, pp)
        changes["parallelism.pp_layer_split"] = [base + (i < extra) for i in range(pp)]
    full = tiny_changes(arch, **{k.replace(".", "__"): v for k, v in changes.items()})
    return with_values(default_plan(), full)


@settings(max_examples=150, deadline=None)
@given(small_plans(), st.integers(1, 24))
def test_lattice_legal_exactly_when_legality_reports_nothing(plan: Plan, world: int) -> None:
    lattice = enumerate_layouts(plan, world, NO_PREFERENCES)
    for layout in lattice.legal:
        assert plan_problems(with_layout(plan, layout)) == []
    for rejected in lattice.rejected:
        derived = plan_problems(with_layout(plan, rejected.layout))
        assert rejected.reasons == tuple(p.message for p in derived)


@settings(max_examples=100, deadline=None)
@given(st.lists(small_plans(), min_size=1, max_size=3), st.integers(1, 24))
def test_cached_rule_groups_give_every_rule_run_afresh(plans: list[Plan], world: int) -> None:
    """plan_problems caches each rule group on the values it is given; the plans here —
    several random plans laid out as every layout of one world size, legal or not —
    share TPs, pipelines, EPs and DPs, so later ones are answered from entries the
    earlier ones left: each must give what the groups give run afresh, in order."""
    for plan in plans:
        for layout in enumerate_layouts(plan, world, NO_PREFERENCES).legal[:8]:
            laid = with_layout(plan, layout)
            assert plan_problems(laid) == rule_problems(laid) == []
        for rejected in enumerate_layouts(plan, world, NO_PREFERENCES).rejected[:8]:
            laid = with_layout(plan, rejected.layout)
            assert plan_problems(laid) == rule_problems(laid)
            assert tuple(p.message for p in plan_problems(laid)) == rejected.reasons
        assert plan_problems(plan) == rule_problems(plan)


@settings(max_examples=60, deadline=None)
@given(
    small_plans(hold_micro_only=True),
    st.integers(1, 12),
    st.sampled_from([NO_PREFERENCES, LayoutPreferences(), LayoutPreferences().relaxed()]),
)
def test_search_shapes_are_the_legal_shapes_of_the_lattice(
    plan: Plan, max_ranks: int, prefs: LayoutPreferences
) -> None:
    """With no shard group and the micro-batch held, DP constrains nothing but the EP
    folding, so the shapes the search starts from are those of the legal DP-1 layouts of
    every world size up to the bound (under the same preferences) — with every EP up to
    the bound that passes the EP rules, since the folding rule is judged with DP later.
    (The preferences that depend on DP — FSDP padding — are judged with DP by the search
    too, so they are left out of the comparison.)"""
    prefs = replace(prefs, max_padding_share=1.0)
    templates = legal_shapes(plan, max_ranks, prefs)
    assert templates == sorted(templates, key=Layout.preference)  # in preference order
    b, moe = plan.batch, plan.model.architecture.moe is not None
    etp = plan.parallelism.expert_tp if moe else 1
    for t in templates:  # DP-1 templates of the plan's batch, expert TP and split
        split = candidate_pipeline(plan, t.pp)[1]
        assert (t.dp, t.micro_batch, t.grad_accum, t.etp, t.pp_split) == (
            1, b.micro_batch, b.grad_accum, etp, split
        )  # fmt: skip
    shapes = [s.shape for s in templates]
    arch = plan.model.architecture
    strategy = plan.parallelism.strategy
    stack = concrete_stack(plan.stack.name, strategy, plan.method.kind)
    eps = [
        e
        for e in rules.ep_values(arch)
        if e <= max_ranks
        and not rules.ep_problems(e, arch)
        and not dimension_problems(stack, strategy, "ep", e)
    ]
    expected = {
        (*layout.shape[:3], ep)
        for world in range(1, max_ranks + 1)
        for layout in enumerate_layouts(plan, world, prefs).legal
        if layout.dp == 1 and layout.ep == 1
        for ep in eps
    }
    assert set(shapes) == expected and len(shapes) == len(expected)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 40),
    st.none() | st.integers(1, 6),
    st.none() | st.integers(1, 48),
    st.integers(1, 4),
    st.sampled_from([1, 2, 4, 8]),
    st.sampled_from([1, 2]),
    st.sampled_from([1, 2, 4]),
    st.sampled_from([1, 2]),
)
def test_dp_values_are_exactly_the_dp_passing_the_rules(
    max_dp: int, sg: int | None, held: int | None, micro: int, ep: int, etp: int, tp: int, cp: int
) -> None:
    """The search's DP enumeration (from the rules' structure) against the rules, the
    EP folding rule included (EP × expert TP must divide TP × CP × DP)."""
    arch = tiny(dict(family="mixtral", moe=MOE)).model.architecture
    expected = [
        d
        for d in range(1, max_dp + 1)
        if not rules.dp_problems(d, sg)
        and not rules.fold_problems(ep, etp, tp * cp * d, arch)
        and (held is None or rules.global_batch_reachable(held, micro, d) is None)
    ]
    step = rules.fold_step(ep, etp, tp, cp, arch)
    assert list(rules.dp_values(max_dp, sg, held, micro, step)) == expected


@settings(max_examples=100, deadline=None)
@given(small_plans())
def test_dimension_values_miss_no_legal_value(plan: Plan) -> None:
    """What the search enumerates per dimension is a superset of what passes: every
    value left out breaks a rule of its dimension."""
    arch, seq = plan.model.architecture, plan.batch.seq_len
    for tp in set(range(1, 2 * arch.heads + 2)) - set(rules.tp_values(arch)):
        assert rules.tp_problems(tp, arch)
    for pp in set(range(1, arch.layers + 4)) - set(rules.pp_values(arch.layers)):
        assert rules.pp_problems(pp, arch.layers, 1, None, "1f1b")
    for cp in set(range(1, 2 * seq + 2)) - set(rules.cp_values(seq)):
        assert rules.cp_problems(cp, seq)
    for ep in set(range(1, 14)) - set(rules.ep_values(arch)):
        assert rules.ep_problems(ep, arch)
