"""The training stack as an input: ``auto`` fields resolved once, never over a user's
value, re-derived when the stack changes, refused where the stack cannot run the plan."""

from __future__ import annotations

import json
from typing import Any, get_args

import pytest

from engine.cli import main
from engine.errors import PlanError
from engine.estimate import estimate
from engine.ledger.nodes.ledgers import node_ledgers
from engine.plan import Plan, default_plan, with_values
from engine.sections.stack import ConcreteStack, StackName
from engine.sources import all_sources
from engine.stacks.catalog import STACKS, concrete_stack
from engine.stacks.defaults import (
    require_resolved,
    resolve_stack_defaults,
    resolved,
    unresolved_fields,
)
from engine.stacks.stack_rules import RULES, STACK_FIELDS


def _plan(**changes: Any) -> Plan:
    return with_values(default_plan(), {k.replace("__", "."): v for k, v in changes.items()})


def test_every_concrete_stack_is_in_the_table() -> None:
    assert set(STACKS) == set(get_args(ConcreteStack))
    assert set(get_args(StackName)) == {"auto", *STACKS}


@pytest.mark.parametrize(
    ("strategy", "kind", "stack"),
    [
        ("fsdp2", "full", "pytorch"),
        ("ddp", "full", "pytorch"),
        ("fsdp1_full_shard", "full", "pytorch"),
        ("zero2", "full", "deepspeed"),
        ("zero3", "lora", "hf_trainer"),
        ("fsdp2", "qlora", "hf_trainer"),
        ("megatron_distopt", "full", "megatron_core"),
        ("megatron_distopt", "lora", "megatron_core"),
    ],
)
def test_auto_picks_the_stack_the_strategy_and_method_imply(
    strategy: Any, kind: Any, stack: str
) -> None:
    assert concrete_stack("auto", strategy, kind) == stack


def _moe_default_plan() -> Plan:
    """The default plan with a mixture-of-experts model: it has every stack-decided
    field (a dense model has no experts' storage to decide)."""
    return with_values(
        default_plan(),
        {"model.architecture.moe": {"num_experts": 4, "top_k": 1, "expert_intermediate": 64}},
    )


def test_the_default_plan_resolves_every_auto_field_and_records_where_from() -> None:
    """Every stack-decided field of the default plan is ``auto``; resolution leaves
    none, and each derived value names the stack and a known source key. A dense model
    leaves only the experts' storage undecided (it has none); QLoRA's 4-bit storage and
    the model's dropout are resolved but listed only where they apply (a QLoRA plan,
    Megatron's model)."""
    dense = resolve_stack_defaults(default_plan()).derived
    shown = STACK_FIELDS - {
        "method.qlora.quant_storage",
        "method.dropout",
        "runtime.qkv_fusion",  # torchtitan's model code only
        "runtime.rope_cache",
    }
    assert set(dense) == shown - {"model.architecture.moe.expert_storage"}
    assert resolved(default_plan()).method.qlora.quant_storage == "bf16"  # FSDP2
    plan = _moe_default_plan()
    assert set(unresolved_fields(plan)) == STACK_FIELDS
    r = resolve_stack_defaults(plan)
    assert r.stack == "pytorch"
    assert unresolved_fields(r.plan) == []
    assert set(r.derived) == shown
    sources = all_sources()
    for path, d in r.derived.items():
        assert d.stack == "pytorch"
        assert d.source in sources, (path, d.source)
        assert d.badge.startswith("from stack pytorch: ")


def test_a_value_the_user_set_is_never_replaced() -> None:
    plan = _plan(method__optimizer__implementation="for_loop", host__model_init="zero_init")
    r = resolve_stack_defaults(plan)
    assert r.plan.method.optimizer.implementation == "for_loop"
    assert r.plan.host.model_init == "zero_init"
    assert "method.optimizer.implementation" not in r.derived
    assert "host.model_init" not in r.derived


@pytest.mark.parametrize("stack", list(STACKS))
@pytest.mark.parametrize("strategy", ["ddp", "zero2", "zero3", "fsdp2", "megatron_distopt"])
def test_resolved_plans_are_valid_plans(stack: str, strategy: str) -> None:
    """The values the rules give pass the plan's own validation (resolution copies
    without re-validating, so this is what keeps it honest)."""
    plan = _plan(stack__name=stack, parallelism__strategy=strategy)
    r = resolved(plan)
    assert Plan.model_validate(r.model_dump(mode="json")) == r


def test_resolving_twice_changes_nothing() -> None:
    r = resolved(_plan(parallelism__strategy="zero3"))
    assert resolved(r) == r
    assert resolve_stack_defaults(r).derived == {}


def test_the_estimate_carries_the_plans_own_hash() -> None:
    plan = default_plan()
    assert estimate(plan).config_hash == plan.config_hash()


def test_ledger_functions_refuse_an_unresolved_plan() -> None:
    with pytest.raises(ValueError, match="left at auto"):
        require_resolved(default_plan())
    with pytest.raises(ValueError, match="left at auto"):
        node_ledgers(default_plan())
    require_resolved(resolved(default_plan()))


def test_every_rule_names_a_field_the_plan_has() -> None:
    plan = resolved(_moe_default_plan())
    for path, _, _ in RULES:
        node: Any = plan
        for key in path.split("."):
            node = getattr(node, key)
        assert node is not None, path


@pytest.mark.parametrize(
    ("stack", "strategy", "fields"),
    [
        ("deepspeed", "fsdp2", ("stack.name", "parallelism.strategy")),
        ("pytorch", "zero3", ("stack.name", "parallelism.strategy")),
        ("torchtitan", "zero2", ("stack.name", "parallelism.strategy")),
        ("megatron_core", "fsdp2", ("stack.name", "parallelism.strategy")),
    ],
)
def test_a_stack_refuses_a_strategy_it_does_not_run(
    stack: str, strategy: str, fields: tuple[str, ...]
) -> None:
    plan = _plan(stack__name=stack, parallelism__strategy=strategy)
    with pytest.raises(PlanError) as err:
        estimate(plan)
    assert err.value.problems[0].fields == fields
    assert f"stack.name {stack}" in str(err.value)


@pytest.mark.parametrize("stack", ["torchtitan", "megatron_core"])
def test_peft_needs_a_stack_that_builds_hf_models(stack: str) -> None:
    strategy = "megatron_distopt" if stack == "megatron_core" else "fsdp2"
    plan = _plan(stack__name=stack, parallelism__strategy=strategy, method__kind="lora")
    with pytest.raises(PlanError) as err:
        estimate(plan)
    assert err.value.problems[0].fields[0] == "method.kind"


def test_the_cli_names_the_stack_and_lists_its_defaults(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``memplan estimate`` prints the stack and counts the inputs it decided; with
    ``--formulas`` each with its reason and source; ``--json`` carries them."""
    assert main(["estimate", "--no-counts", "--set", "parallelism.strategy=zero2"]) == 0
    out = capsys.readouterr().out
    assert "Training stack: DeepSpeed — stack.name deepspeed (auto); 13 input(s)" in out
    assert (
        main(["estimate", "--no-counts", "--formulas", "--set", "parallelism.strategy=zero2"]) == 0
    )
    out = capsys.readouterr().out
    assert "  method.precision.policy = amp_master  — bf16.enabled casts" in out
    assert main(["estimate", "--json", "--no-counts", "--set", "stack.name=hf_trainer"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["stack"]["name"] == "hf_trainer" and doc["stack"]["requested"] == "hf_trainer"
    assert doc["stack"]["derived"]["method.optimizer.implementation"]["value"] == "fused"
    assert doc["stack"]["derived"]["runtime.expandable_segments"]["value"] is False
