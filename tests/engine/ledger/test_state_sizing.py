"""States sized straight from their tensors must not change a byte or a word.

When every tensor of a state is its own allocation (unsharded, or FSDP2's dim-0
shards: :func:`engine.ledger.states.allocs.one_per_tensor`), the state rows and the
optimizer step's temporaries sum their bytes from the tensors themselves and build the
allocations only when a formula is read (:func:`engine.ledger.states.allocs.
state_sized`). Here every such row is compared — ids, labels, bytes, formulas — with the
same row built the old way, through :func:`~engine.ledger.states.allocs.shard_allocs`'
allocations, on random plans and on the MoE presets at several layouts and methods.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from engine.errors import PlanError
from engine.ledger.peaks import optimizer_step
from engine.ledger.peaks.backward_grads import backward_grad_rows
from engine.ledger.peaks.optimizer_step import optimizer_temp_rows
from engine.ledger.precision import resolve_formats
from engine.ledger.row import Row
from engine.ledger.states import allocs, one_pass, optimizer_rows
from engine.ledger.states.persistent import stage_held
from engine.ledger.states.rows import persistent_rows
from engine.plan import Plan, with_values
from engine.presets import plan_for_model_preset
from engine.stacks.defaults import resolved
from tests.engine.ledger.state_cases import LAYOUTS, laid_out, written
from tests.fuzz.plans import plans


@contextmanager
def _through_allocs() -> Iterator[None]:
    """Every state sized from its allocations, as before the per-tensor sums."""
    mods = (allocs, optimizer_rows, optimizer_step, one_pass)
    saved = [m.one_per_tensor for m in mods]
    never: Callable[[object, bool], bool] = lambda _rule, _sharded: False  # noqa: E731
    for m in mods:
        m.one_per_tensor = never  # type: ignore[assignment]
    try:
        yield
    finally:
        for m, f in zip(mods, saved, strict=True):
            m.one_per_tensor = f  # type: ignore[assignment]


def _state_rows(plan: Plan, stage: int) -> list[Row]:
    held_t, ctx = stage_held(plan, stage)
    held = list(held_t)
    out = persistent_rows(held, resolve_formats(plan.method.precision), plan.method.optimizer, ctx)
    out += optimizer_temp_rows(plan, held, ctx.rule)
    out += backward_grad_rows(plan, held, ctx, True)
    return out


def _assert_same(plan: Plan) -> None:
    try:
        r = resolved(plan)
        fast = [written(_state_rows(r, s)) for s in range(r.parallelism.pp)]
    except (PlanError, NotImplementedError, ValueError):
        assume(False)
        return
    with _through_allocs():
        slow = [written(_state_rows(r, s)) for s in range(r.parallelism.pp)]
    assert fast == slow


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(plans(), st.sampled_from(LAYOUTS))
def test_sized_from_tensors_on_random_plans(plan: Plan, layout: dict[str, Any]) -> None:
    _assert_same(laid_out(plan, layout))


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.sampled_from(["deepseek-v3", "llama-4-maverick", "mixtral-8x7b", "llama-3.1-8b"]),
    st.sampled_from(LAYOUTS),
    st.sampled_from(["full", "lora", "qlora", "custom"]),
    st.sampled_from(["adamw", "adam8bit", "adafactor", "sgd_momentum"]),
    st.sampled_from([1, 512, 4096]),
)
def test_sized_from_tensors_on_presets(
    name: str, layout: dict[str, Any], kind: str, opt: str, gran: int
) -> None:
    changes = {
        **layout,
        "method.kind": kind,
        "method.optimizer.name": opt,
        "runtime.allocation_granularity_bytes": gran,
    }
    if kind == "custom":
        changes["method.custom.roles"] = ["q", "expert_up"]
    try:
        plan = with_values(plan_for_model_preset(name), changes)
    except (PlanError, ValueError):
        assume(False)
    _assert_same(plan)
