"""Every hard rule of engine.legality: its fields, its one wording, and that the plan
validators, estimate() and the layout lattice all refuse a plan with the same sentence.

The plans are a tiny Llama (hidden 64, 2 layers, 4 heads / 2 KV heads, sequence 4) so
an estimate costs nothing; each case breaks exactly one rule, so each expects exactly
one problem.
"""

from __future__ import annotations

from typing import Any

import pytest
from legality_plans import MOE, NO_PREFERENCES, tiny, unchecked
from pydantic import ValidationError

from engine.errors import PlanError, Problem
from engine.estimate import estimate
from engine.layout.counts import gpu_counts
from engine.layout.shapes import Layout, check, enumerate_layouts, with_layout
from engine.legality.checks import plan_problems, rule_problems
from engine.plan import (
    Plan,
    default_plan,
    describe_validation_error,
    get_value,
    validation_problems,
    with_values,
)


def lattice_reasons(plan: Plan) -> tuple[str, ...]:
    """Why the lattice rejects the plan's own layout under the hard rules only."""
    par = plan.parallelism
    got = check(plan, par.tp, par.pp, par.cp, par.ep, par.dp, NO_PREFERENCES)
    return () if isinstance(got, Layout) else got.reasons


EVERY_FIELD = tiny(
    {"family": "mixtral", "moe": MOE},
    parallelism__pp=2,
    parallelism__pp_layer_split=[1, 1],
    parallelism__shard_group_size=1,
    batch__global_batch=1,
)
"""A plan where every field a rule may name is set (an optional one names nothing)."""


def assert_names_real_fields(problem: Problem) -> None:
    assert problem.fields
    for path in problem.fields:
        get_value(EVERY_FIELD, path)  # KeyError for a path that is no plan field
    assert problem.fields[0] in problem.message


def refused_alike(plan: Plan, problem: Problem) -> None:
    """plan_problems, estimate() and the lattice give the one problem, worded alike."""
    assert_names_real_fields(problem)
    assert plan_problems(plan) == [problem]
    with pytest.raises(PlanError) as info:
        estimate(plan)
    assert info.value.problems == (problem,)
    assert str(info.value) == problem.message
    assert lattice_reasons(plan) == (problem.message,)


# --- rules a file already refuses at load time ----------------------------------------

LOAD_TIME = [
    pytest.param(
        {"parallelism.dp": 2, "parallelism.pp": 2, "parallelism.pp_layer_split": (1, 1, 0)},
        Problem(
            ("parallelism.pp_layer_split", "parallelism.pp"),
            "parallelism.pp_layer_split has 3 entries but parallelism.pp is 2: "
            "give one layer count per pipeline stage",
        ),
        id="split-length",
    ),
    pytest.param(
        {"parallelism.pp": 2, "parallelism.pp_layer_split": (3, -1)},
        Problem(
            ("parallelism.pp_layer_split",),
            "parallelism.pp_layer_split entries must be non-negative layer counts",
        ),
        id="split-non-negative",
    ),
    pytest.param(
        {"parallelism.pp": 2, "parallelism.virtual_stages": 2},
        Problem(
            ("parallelism.virtual_stages", "parallelism.pp_schedule"),
            "parallelism.virtual_stages (2) > 1 needs parallelism.pp_schedule "
            "interleaved_1f1b (not 1f1b)",
        ),
        id="virtual-needs-interleaving",
    ),
    pytest.param(
        {"parallelism.dp": 4, "parallelism.shard_group_size": 3},
        Problem(
            ("parallelism.shard_group_size", "parallelism.dp"),
            "parallelism.shard_group_size (3) must divide parallelism.dp (4)",
        ),
        id="shard-group-divides-dp",
    ),
    pytest.param(
        {"parallelism.pp": 2, "parallelism.pp_layer_split": (1, 2)},
        Problem(
            ("parallelism.pp_layer_split", "model.architecture.layers"),
            "parallelism.pp_layer_split sums to 3 layers but the model has 2 "
            "(model.architecture.layers)",
        ),
        id="split-sums-to-layers",
    ),
    pytest.param(
        {"parallelism.pp": 4},
        Problem(
            ("parallelism.pp", "model.architecture.layers"),
            "parallelism.pp (4) exceeds the model's 2 layers (model.architecture.layers)",
        ),
        id="pp-within-layers",
    ),
]


@pytest.mark.parametrize(("changes", "problem"), LOAD_TIME)
def test_load_time_rule_refuses_the_file_and_estimate_and_lattice(
    changes: dict[str, Any], problem: Problem
) -> None:
    """The validators refuse the values with the rule's fields and wording; the same
    values slipped past them (as the search's model_copy could) are refused alike.
    The 4-layer model keeps the interleaving case from also breaking the chunk rule."""
    base = tiny({"layers": 4}) if "parallelism.virtual_stages" in changes else tiny()
    with pytest.raises(ValidationError) as info:
        with_values(base, changes)
    assert validation_problems(info.value) == [problem]
    assert describe_validation_error(info.value, "plan") == [f"plan: {problem.message}"]
    refused_alike(unchecked(base, changes), problem)


# --- rules only estimate() enforces ----------------------------------------------------

ESTIMATE_TIME = [
    pytest.param(
        {},
        {"parallelism.tp": 3},
        Problem(
            ("parallelism.tp", "model.architecture.heads"),
            "parallelism.tp (3) must divide the 4 attention heads (model.architecture.heads)",
        ),
        id="tp-divides-heads",
    ),
    pytest.param(
        {"heads": 6, "head_dim": 16},
        {"parallelism.tp": 3},
        Problem(
            ("parallelism.tp", "model.architecture.kv_heads"),
            "parallelism.tp (3) must divide the 2 KV heads (model.architecture.kv_heads) "
            "or be a multiple of them",
        ),
        id="tp-fits-kv-heads",
    ),
    pytest.param(
        {"layers": 6},
        {
            "parallelism.pp": 2,
            "parallelism.virtual_stages": 2,
            "parallelism.pp_schedule": "interleaved_1f1b",
        },
        Problem(
            ("parallelism.virtual_stages", "parallelism.pp", "model.architecture.layers"),
            "the 6 layers (model.architecture.layers) do not split into parallelism.pp × "
            "parallelism.virtual_stages = 2 × 2 = 4 equal chunks: change either, or give "
            "parallelism.pp_layer_split",
        ),
        id="virtual-chunks-even",
    ),
    pytest.param(
        {},
        {"parallelism.cp": 3},
        Problem(
            ("parallelism.cp", "batch.seq_len"),
            "parallelism.cp (3) must divide the sequence length 4 (batch.seq_len)",
        ),
        id="cp-divides-sequence",
    ),
    pytest.param(
        {},
        {"parallelism.ep": 2},
        Problem(
            ("parallelism.ep", "model.architecture.moe"),
            "parallelism.ep (2) > 1 needs a mixture-of-experts model "
            "(model.architecture.moe is not set)",
        ),
        id="ep-needs-experts",
    ),
    pytest.param(
        {"family": "mixtral", "moe": MOE},
        {"parallelism.ep": 3, "parallelism.dp": 3},
        Problem(
            ("parallelism.ep", "model.architecture.moe.num_experts"),
            "parallelism.ep (3) must divide the 4 experts (model.architecture.moe.num_experts)",
        ),
        id="ep-divides-experts",
    ),
    pytest.param(
        {"family": "mixtral", "moe": MOE},
        {"parallelism.ep": 4, "parallelism.dp": 2},
        Problem(
            (
                "parallelism.ep",
                "parallelism.expert_tp",
                "parallelism.tp",
                "parallelism.cp",
                "parallelism.dp",
            ),
            "parallelism.ep × parallelism.expert_tp = 4 × 1 = 4 must divide the 2 ranks of a "
            "pipeline stage (parallelism.tp × parallelism.cp × parallelism.dp): expert "
            "parallelism folds over those ranks",
        ),
        id="ep-folds",
    ),
    pytest.param(
        {},
        {"batch.hold_fixed": "global_batch", "batch.global_batch": 3, "parallelism.dp": 2},
        Problem(
            ("batch.global_batch", "batch.micro_batch", "parallelism.dp"),
            "the global batch 3 (batch.global_batch) is not a multiple of batch.micro_batch "
            "× data-parallel replicas (parallelism.dp) = 1 × 2 = 2",
        ),
        id="global-batch-reachable",
    ),
]


@pytest.mark.parametrize(("arch", "changes", "problem"), ESTIMATE_TIME)
def test_estimate_time_rule_refuses_estimate_and_lattice(
    arch: dict[str, Any], changes: dict[str, Any], problem: Problem
) -> None:
    """The file loads (it can be saved and fixed) but nothing computes it."""
    refused_alike(tiny(arch, **changes), problem)


def test_global_batch_must_match_the_accumulation() -> None:
    """Global batch 4 over 2 replicas of micro-batch 1 needs accumulation 2, not 1. The
    lattice never meets this one: holding the global batch, it derives the accumulation,
    and the plan it derives passes."""
    plan = tiny(batch__global_batch=4, batch__hold_fixed="global_batch", parallelism__dp=2)
    problem = Problem(
        ("batch.global_batch", "batch.grad_accum"),
        "batch.global_batch (4) ≠ batch.micro_batch × batch.grad_accum × data-parallel "
        "replicas = 1 × 1 × 2 = 2: set batch.grad_accum to 2 or clear batch.global_batch",
    )
    assert_names_real_fields(problem)
    assert plan_problems(plan) == [problem]
    with pytest.raises(PlanError, match="set batch.grad_accum to 2"):
        estimate(plan)
    got = check(plan, 1, 1, 1, 1, 2, NO_PREFERENCES)
    assert isinstance(got, Layout) and got.grad_accum == 2
    assert plan_problems(with_layout(plan, got)) == []


# --- offload: no layout can fix it -------------------------------------------------------

OFFLOAD = [
    pytest.param(
        "ddp",
        "none",
        "cpu",
        ("parallelism.strategy", "offload.params", "offload.optimizer"),
        "offload needs a sharded strategy: DDP keeps every state on the GPU "
        "(choose ZeRO or FSDP in parallelism.strategy)",
        id="ddp-offloads-nothing",
    ),
    pytest.param(
        "fsdp2",
        "nvme",
        "none",
        ("parallelism.strategy", "offload.params", "offload.optimizer"),
        "FSDP offloads to the CPU only; NVMe offload is DeepSpeed ZeRO-Infinity "
        "(parallelism.strategy zero3)",
        id="fsdp-cpu-only",
    ),
    pytest.param(
        "fsdp1_full_shard",
        "none",
        "cpu",
        ("offload.params", "parallelism.strategy"),
        "FSDP's CPU offload moves parameters, gradients and optimizer state together: set "
        "offload.params to cpu (optimizer-only offload is DeepSpeed ZeRO-Offload)",
        id="fsdp-moves-all-states",
    ),
    pytest.param(
        "megatron_distopt",
        "cpu",
        "cpu",
        ("offload.params", "parallelism.strategy"),
        "Megatron's distributed optimizer does not offload parameters; set offload.params to none",
        id="megatron-no-param-offload",
    ),
    pytest.param(
        "megatron_distopt",
        "none",
        "nvme",
        ("offload.optimizer", "parallelism.strategy"),
        "Megatron offloads the optimizer to the CPU only, not NVMe: set offload.optimizer to cpu",
        id="megatron-cpu-only",
    ),
    pytest.param(
        "zero2",
        "cpu",
        "cpu",
        ("offload.params", "parallelism.strategy"),
        "offload.params needs ZeRO stage 3 (parallelism.strategy zero3): "
        "DeepSpeed offloads parameters only with ZeRO-3",
        id="zero-params-need-stage-3",
    ),
    pytest.param(
        "zero2",
        "none",
        "nvme",
        ("offload.optimizer", "parallelism.strategy"),
        "offload.optimizer nvme (ZeRO-Infinity) needs parallelism.strategy zero3",
        id="zero-nvme-needs-stage-3",
    ),
]


@pytest.mark.parametrize(("strategy", "params", "optimizer", "fields", "message"), OFFLOAD)
def test_offload_rule_refuses_estimate_and_every_layout(
    strategy: str, params: str, optimizer: str, fields: tuple[str, ...], message: str
) -> None:
    """An offload rule does not depend on the layout: the lattice rejects every layout
    of the plan with it, and the GPU counts say why without estimating anything."""
    plan = tiny(
        parallelism__strategy=strategy, offload__params=params, offload__optimizer=optimizer
    )
    refused_alike(plan, Problem(fields, message))
    lattice = enumerate_layouts(plan, 4, NO_PREFERENCES)
    assert not lattice.legal and all(r.reasons[-1] == message for r in lattice.rejected)
    counts = gpu_counts(plan, max_gpus=8)
    assert counts.estimates == 0
    assert counts.first_layout.reason == (
        f"no legal layout up to 8 GPUs; every layout is refused: {message}"
    )


def test_several_problems_are_all_reported_and_joined() -> None:
    """TP 3 and CP 3 on 4 heads and sequence 4: both problems, one PlanError whose text
    is the messages joined by "; " (what the CLI prints)."""
    plan = tiny(parallelism__tp=3, parallelism__cp=3)
    problems = plan_problems(plan)
    assert [p.fields[0] for p in problems] == ["parallelism.tp", "parallelism.cp"]
    with pytest.raises(PlanError) as info:
        estimate(plan)
    assert str(info.value) == "; ".join(p.message for p in problems)
    assert lattice_reasons(plan) == tuple(p.message for p in problems)


def test_a_batch_edit_keeps_the_cached_problems_and_their_order() -> None:
    """TP 3 on 4 heads, CP 3 on sequence 4, EP 2 on a dense model, global batch 3 over
    DP 2, the optimizer on NVMe under FSDP2: a problem in every part of the order (TP,
    CP, EP, batch, offload). Edits of the batch keep the five sections the rest read, so
    ``plan_problems`` answers them from the entry of those sections' objects
    (``engine/legality/checks.py`` ``_sections_problems``) — and still reads the batch
    afresh: sequence 6 takes the CP problem away, global batch 4 at accumulation 1 gives
    the accumulation problem instead. Each equals every rule run afresh."""
    plan = tiny(
        parallelism__tp=3,
        parallelism__cp=3,
        parallelism__ep=2,
        parallelism__dp=2,
        batch__global_batch=3,
        offload__optimizer="nvme",
    )
    tp, cp, ep = "parallelism.tp", "parallelism.cp", "parallelism.ep"
    batch, offload = "batch.global_batch", "parallelism.strategy"
    six = with_values(plan, {"batch.seq_len": 6})
    four = with_values(plan, {"batch.seq_len": 12, "batch.global_batch": 4})
    for laid, fields in (
        (plan, [tp, cp, ep, batch, offload]),
        (six, [tp, ep, batch, offload]),
        (four, [tp, ep, batch, offload]),
    ):
        assert laid.parallelism is plan.parallelism and laid.model is plan.model
        got = plan_problems(laid)
        assert [p.fields[0] for p in got] == fields
        assert got == rule_problems(laid)
    assert plan_problems(four)[2].fields == ("batch.global_batch", "batch.grad_accum")


def test_a_plain_message_is_one_problem_without_fields() -> None:
    """Errors raised with a sentence only (the ledger's) still read the same."""
    err = PlanError("method.custom needs roles or a trainable count")
    assert err.problems == (Problem((), "method.custom needs roles or a trainable count"),)
    assert str(err) == "method.custom needs roles or a trainable count"


def test_a_legal_plan_has_no_problem() -> None:
    assert plan_problems(default_plan()) == []
    assert plan_problems(EVERY_FIELD) == []
