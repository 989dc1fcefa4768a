"""The stack's resolution builds its plan without validation (engine/stacks/defaults.py:
``_batchless`` puts the sections together with ``Plan.model_construct``, ``_replace`` and
``with_fields`` copy without re-validating, the plan's own batch and layout go back in
unvalidated). That is sound only while every value put in is one full validation would
accept and keep: here, on random plans — stack, strategy, method, the stack-decided
fields left at ``auto`` or set, any batch — the resolved plan equals its own JSON dump
validated afresh, and a batch edit resolved on the fast path (untouched sections kept
by identity) equals the resolution of the same plan loaded through full validation."""

from __future__ import annotations

from typing import Any, get_args

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.plan import Plan, default_plan, with_values
from engine.sections.parallel import ParallelismSection
from engine.sections.stack import StackName
from engine.stacks.defaults import resolve_stack_defaults

STRATEGIES = get_args(ParallelismSection.model_fields["strategy"].annotation)
KINDS = ("full", "lora", "qlora")
STACK_NAMES = get_args(StackName)
SET_BY_USER: dict[str, tuple[Any, ...]] = {
    "method.recompute.policy": ("auto", "none", "full"),
    "runtime.qkv_fusion": ("auto", "fused", "as_model"),
    "runtime.zero_grad": ("auto", "set_to_none", "zero_fill"),
    "runtime.cublas_workspace_bytes": (None, {"low": 0, "high": 0}),
    "runtime.expandable_segments": (None, True, False),
}
"""A few stack-decided fields, left at their ``auto`` or set by the user."""


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    changes: dict[str, Any] = {
        "stack.name": draw(st.sampled_from(STACK_NAMES)),
        "parallelism.strategy": draw(st.sampled_from(STRATEGIES)),
        "method.kind": draw(st.sampled_from(KINDS)),
    }
    for path, values in SET_BY_USER.items():
        changes[path] = draw(st.sampled_from(values))
    try:
        return with_values(default_plan(), changes)
    except ValueError:  # a combination the plan refuses: not a plan to resolve
        return draw(st.nothing())


def _validated(plan: Plan) -> Plan:
    return Plan.model_validate(plan.model_dump(mode="json"))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(plans(), st.integers(1, 64), st.sampled_from([512, 4096, 8192]))
def test_the_resolved_plan_is_what_full_validation_builds(
    plan: Plan, micro_batch: int, seq_len: int
) -> None:
    r = resolve_stack_defaults(plan)
    again = _validated(r.plan)
    assert again == r.plan and again.model_dump() == r.plan.model_dump()
    assert hash(again) == hash(r.plan)
    # the fast path: a batch edit keeps every other section's object, and its resolution
    # puts the plan's batch into the batchless resolution without validating anything
    edited = with_values(plan, {"batch.micro_batch": micro_batch, "batch.seq_len": seq_len})
    fast = resolve_stack_defaults(edited)
    slow = resolve_stack_defaults(_validated(edited))  # every section a new object
    assert fast.plan == slow.plan == _validated(fast.plan)
    assert fast.plan.to_canonical_json() == slow.plan.to_canonical_json()
    assert fast.derived == slow.derived and fast.stack == slow.stack
    assert fast.plan.batch == edited.batch and fast.plan.method.kind in KINDS
