"""Uneven pipeline splits as the frameworks run them: the weighted split, Megatron's
layout string, and which stages can decide fit."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from engine.errors import Problem
from engine.estimate import decisive_stages, estimate
from engine.ledger.placement import even_split, stage_split, weighted_split
from engine.legality import pipeline_layout
from engine.plan import Plan, default_plan, with_values
from engine.presets import plan_for_model_preset


def test_weighted_split_deepseek_v3_and_405b() -> None:
    """torchtitan ``_generate_llm_fqn_per_model_part`` with first/last stage weight 1:
    DeepSeek-V3's 61 layers on 16 stages are 63 units, 63 = 15 × 4 + 3, so stages 0–14
    take 4 units and stage 15 takes 3; the embedding and the output take one each:
    3, 4 × 14, 2. Llama-3.1-405B's 126 layers on 16 stages: 128 = 16 × 8 → 7, 8 × 14, 7
    (Meta's Llama 3 paper: one layer fewer on the first and last stage); on 8 stages
    128 = 8 × 16 → 15, 16 × 6, 15."""
    assert weighted_split(61, 16) == (3, *[4] * 14, 2)
    assert weighted_split(126, 16) == (7, *[8] * 14, 7)
    assert weighted_split(126, 8) == (15, *[16] * 6, 15)
    assert weighted_split(5, 1) == (5,)
    assert even_split(61, 16) == (4, *[4] * 12, 3, 3, 3)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 400), st.integers(1, 64))
def test_splits_cover_every_layer(layers: int, pp: int) -> None:
    """Every split places each layer once; the weighted one never goes negative, and its
    middle stages differ by at most one layer."""
    if pp > layers:
        return
    for split in (even_split(layers, pp), weighted_split(layers, pp)):
        assert len(split) == pp and sum(split) == layers and min(split) >= 0
    w = weighted_split(layers, pp)
    if pp > 2:
        assert max(w[1:-1]) - min(w[1:-1]) <= 1


def test_policy_auto_is_even_when_pp_divides() -> None:
    """auto: 32 layers on 4 stages stay 8 each (Megatron's even split); 32 on 3 stages
    take the weighted split 34 = 12 + 11 + 11 → 11, 11, 10."""
    p = default_plan()
    assert stage_split(p.model.architecture, p.parallelism.model_copy(update={"pp": 4})) == (
        8,
        8,
        8,
        8,
    )
    par3 = p.parallelism.model_copy(update={"pp": 3})
    assert stage_split(p.model.architecture, par3) == (11, 11, 10)
    even = par3.model_copy(update={"pp_split_policy": "even"})
    assert stage_split(p.model.architecture, even) == (11, 11, 10)
    weighted = p.parallelism.model_copy(update={"pp": 4, "pp_split_policy": "weighted"})
    assert stage_split(p.model.architecture, weighted) == (8, 9, 8, 7)


@pytest.mark.parametrize(
    ("text", "pp", "expected"),
    [
        ("Et|(tt|)*29,m|L", 32, "stages"),  # Megatron's docstring example (61 t, 1 m)
        ("E|(t|)*3,m|m||L", 8, "stages"),  # Megatron's --help example
        ("Ettt|(tttt|)*14,ttL", 16, (3, *[4] * 14, 2)),
    ],
)
def test_megatron_layout_strings_parse(text: str, pp: int, expected: object) -> None:
    """``PipelineParallelLayerLayout.parse_str_to_list``: ``(…)*n`` and ``x*n`` unroll,
    commas are cosmetic, ``|`` separates virtual stages."""
    stages = pipeline_layout.parse(text)
    assert isinstance(stages, tuple)
    assert len(stages) == pp
    if expected != "stages":
        assert pipeline_layout.stage_layers(text, pp) == expected


def test_layout_string_rules_and_interleaving() -> None:
    """Megatron's ``validate_layer_layout``: one E first, one L last, t = the layers; the
    stage count is pp × v and virtual stage k sits on rank k mod pp — "Et|tt|tt|tL" on
    PP 2 puts stages 0 and 2 on rank 0 (1 + 2 = 3 layers) and 1, 3 on rank 1 (2 + 1)."""
    assert pipeline_layout.layout_problems("Et|tt|tt|tL", 2, 2, 6, 0) == []
    assert pipeline_layout.stage_layers("Et|tt|tt|tL", 2) == (3, 3)
    assert pipeline_layout.stage_layers("Et|ttt|t|tL", 2) == (2, 4)
    msgs = [p.message for p in pipeline_layout.layout_problems("tE|tt|L", 3, 1, 3, 0)]
    assert "parallelism.pp_layout must start with the one embedding E" in msgs
    msgs = [p.message for p in pipeline_layout.layout_problems("Et|tL", 3, 1, 2, 0)]
    assert msgs == [
        "parallelism.pp_layout has 2 stages but parallelism.pp × "
        "parallelism.virtual_stages = 3 × 1 = 3"
    ]
    msgs = [p.message for p in pipeline_layout.layout_problems("Et|ttL", 2, 1, 4, 0)]
    assert any("places 3 decoder layers" in m for m in msgs)
    bad = pipeline_layout.parse("E(t|)*99999999999|L")
    assert isinstance(bad, Problem) and "more than" in bad.message
    bad = pipeline_layout.parse("Ex|L")
    assert isinstance(bad, Problem) and "'x'" in bad.message


def test_plan_with_a_layout_string_estimates_like_its_split() -> None:
    """A Megatron layout string and the explicit split it implies are the same layout:
    Llama-3.1-8B "E" + 7 t | 9 t × 2 | 7 t + L on PP 4 = (7, 9, 9, 7)."""
    base = with_values(default_plan(), {"parallelism.pp": 4, "parallelism.dp": 2})
    by_layout = with_values(base, {"parallelism.pp_layout": "Et*7|t*9|t*9|t*7L"})
    by_split = with_values(base, {"parallelism.pp_layer_split": [7, 9, 9, 7]})
    a, b = estimate(by_layout), estimate(by_split)
    assert [s.layers for s in a.stages] == [s.layers for s in b.stages]
    assert [s.fit_peak for s in a.stages] == [s.fit_peak for s in b.stages]
    with pytest.raises(ValidationError, match="not both"):
        with_values(by_layout, {"parallelism.pp_layer_split": [7, 9, 9, 7]})
    with pytest.raises(ValidationError, match="places 31 decoder layers"):
        with_values(base, {"parallelism.pp_layout": "Et*7|t*9|t*8|t*7L"})


def test_deepseek_v3_sixteen_stage_split_places_the_dense_layers_first() -> None:
    """DeepSeek-V3 on PP 16 with the weighted split: stage 0 holds the 3 dense layers
    (first_dense_layers = 3), stages 1–14 four MoE layers, stage 15 two and the MTP
    module; the decisive stages are the first, the first middle one and the last."""
    plan = with_values(
        plan_for_model_preset("deepseek-v3"),
        {"parallelism.pp": 16, "parallelism.dp": 64, "parallelism.ep": 64},
    )
    assert stage_split(plan.model.architecture, plan.parallelism) == (3, *[4] * 14, 2)
    assert decisive_stages(plan) == (0, 1, 15)


MOE = {"num_experts": 4, "top_k": 1, "expert_intermediate": 32}


def test_a_dense_then_routed_stage_does_not_dominate_a_routed_one() -> None:
    """Found by the property below: Mixtral-like, four layers split (0, 2, 1, 1), the
    first layer dense. Stage 1 holds [dense, MoE], stage 2 [MoE]: stage 1 has at least
    as many layers of each class, yet stage 2 is heavier at ``backward.end`` — its first
    layer's backward runs the MoE working set (transformers 5
    ``grouped_mm_experts_forward``: fp32 gradient, expanded gradient, index_put result)
    where stage 1's first layer is dense. So stage 2 must be estimated."""
    arch: dict[str, Any] = {
        "family": "mixtral",
        "hidden": 64,
        "layers": 4,
        "heads": 4,
        "kv_heads": 2,
        "intermediate": 128,
        "vocab": 100,
        "moe": {**MOE, "first_dense_layers": 1},
    }
    plan = with_values(
        default_plan(),
        {
            "model.architecture": arch,
            "batch.seq_len": 64,
            "parallelism.pp": 4,
            "parallelism.dp": 64,
            "parallelism.pp_layer_split": [0, 2, 1, 1],
            "batch.grad_accum": 2,
            "method.recompute.policy": "full",
        },
    )
    assert decisive_stages(plan) == (0, 1, 2, 3)
    full = estimate(plan)
    assert full.stages[2].fit_peak.high > full.stages[1].fit_peak.high
    assert estimate(plan, decisive_only=True).fit_peak == full.fit_peak


@st.composite
def split_plans(draw: st.DrawFn) -> Plan:
    """Tiny plans with an explicit uneven split (some stages empty), dense or MoE with
    dense first layers, any schedule, micro-batches fewer or more than the stages."""
    layers = draw(st.integers(4, 9))
    pp = draw(st.integers(4, layers))
    cuts = sorted(draw(st.lists(st.integers(0, layers), min_size=pp - 1, max_size=pp - 1)))
    split = [b - a for a, b in zip([0, *cuts], [*cuts, layers], strict=True)]
    arch: dict[str, Any] = {
        "family": "llama",
        "hidden": 64,
        "layers": layers,
        "heads": 4,
        "kv_heads": 2,
        "intermediate": 128,
        "vocab": draw(st.sampled_from([100, 5000])),
    }
    if draw(st.booleans()):
        arch.update(family="mixtral", moe={**MOE, "first_dense_layers": draw(st.integers(0, 3))})
    return with_values(
        default_plan(),
        {
            "model.architecture": arch,
            "batch.seq_len": 64,
            "parallelism.pp": pp,
            "parallelism.dp": draw(st.sampled_from([1, 2, 64])),
            "parallelism.pp_layer_split": split,
            "parallelism.pp_schedule": draw(st.sampled_from(["1f1b", "gpipe"])),
            "parallelism.strategy": draw(st.sampled_from(["fsdp2", "ddp", "zero1"])),
            "batch.grad_accum": draw(st.integers(1, 6)),
            "method.recompute.policy": draw(st.sampled_from(["none", "full"])),
        },
    )


@settings(max_examples=120, deadline=None)
@given(split_plans())
def test_decisive_stages_decide_like_every_stage(plan: Plan) -> None:
    """The stages :func:`decisive_stages` keeps give the same fit peak, heaviest stage
    and verdict as estimating every stage, for any explicit split."""
    full, fast = estimate(plan), estimate(plan, decisive_only=True)
    assert fast.fit_peak == full.fit_peak
    assert fast.verdict == full.verdict
    heaviest = max(full.stages, key=lambda s: (s.fit_peak.high, -s.stage))
    assert heaviest.stage in decisive_stages(plan)
