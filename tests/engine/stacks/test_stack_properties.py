"""Every stack × strategy × method × offload combination estimates, or is refused with
reasons that each name a plan field — never a crash, never a silent wrong stack."""

from __future__ import annotations

from typing import Any, get_args

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import PlanError
from engine.estimate import estimate
from engine.plan import Plan, default_plan, with_values
from engine.sections.method import MethodKind
from engine.sections.offload import Placement
from engine.sections.parallel import Strategy
from engine.sections.stack import StackName
from engine.stacks.defaults import resolve_stack_defaults, unresolved_fields

STACKS: list[str] = list(get_args(StackName))
STRATEGIES: list[str] = list(get_args(Strategy))
METHODS: list[str] = list(get_args(MethodKind))
PLACEMENTS: list[str] = list(get_args(Placement))


def _plan(stack: str, strategy: str, method: str, params: str, optimizer: str) -> Plan:
    changes: dict[str, Any] = {
        "stack.name": stack,
        "parallelism.strategy": strategy,
        "method.kind": method,
        "offload.params": params,
        "offload.optimizer": optimizer,
        "parallelism.dp": 16 if "hsdp" in strategy or "hybrid" in strategy else 8,
    }
    if method == "custom":
        changes["method.custom.roles"] = ["q", "v"]
    return with_values(default_plan(), changes)


@settings(max_examples=250, deadline=None)
@given(
    st.sampled_from(STACKS),
    st.sampled_from(STRATEGIES),
    st.sampled_from(METHODS),
    st.sampled_from(PLACEMENTS),
    st.sampled_from(PLACEMENTS),
)
def test_every_combination_estimates_or_names_the_field(
    stack: str, strategy: str, method: str, params: str, optimizer: str
) -> None:
    plan = _plan(stack, strategy, method, params, optimizer)
    resolved = resolve_stack_defaults(plan)
    assert unresolved_fields(resolved.plan) == []
    try:
        est = estimate(plan)
    except PlanError as err:
        assert err.problems
        for problem in err.problems:
            assert problem.fields, problem.message
            assert any(f in problem.message for f in problem.fields), problem.message
        return
    assert est.peak.high >= est.peak.low > 0
    assert est.config_hash == plan.config_hash()
    for row in est.rows:
        assert 0 <= row.low <= row.high, row.id
