"""The stack's rules run on the plan without its batch (engine.stacks.defaults
``_batchless``), and the plan's own batch goes back in: a resolved plan keeps its batch,
equals the resolution of the same plan with any other batch but for the batch, and what
was derived does not depend on the batch."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.plan import default_plan, with_values
from engine.presets import plan_for_model_preset
from engine.stacks.defaults import resolve_stack_defaults


@settings(max_examples=30, deadline=None)
@given(
    st.sampled_from(["llama-3.1-8b", "mixtral-8x7b"]),
    st.sampled_from(["fsdp2", "zero3", "ddp", "megatron_distopt"]),
    st.integers(1, 16),
    st.sampled_from([512, 4096]),
    st.integers(1, 8),
)
def test_resolution_keeps_the_batch_and_ignores_it(
    preset: str, strategy: str, micro_batch: int, seq_len: int, grad_accum: int
) -> None:
    plan = with_values(plan_for_model_preset(preset), {"parallelism.strategy": strategy})
    batch = {"batch.micro_batch": micro_batch, "batch.seq_len": seq_len}
    batch["batch.grad_accum"] = grad_accum
    edited = with_values(plan, batch)
    a, b = resolve_stack_defaults(plan), resolve_stack_defaults(edited)
    assert a.plan.batch == plan.batch and b.plan.batch == edited.batch
    assert b.plan.model_copy(update={"batch": plan.batch}) == a.plan
    assert a.derived == b.derived and a.stack == b.stack


def test_a_plan_resolved_twice_is_the_same_object() -> None:
    """Cached on the plan too: the window and every view resolve the same plan again."""
    plan = with_values(default_plan(), {"batch.micro_batch": 3})
    assert resolve_stack_defaults(plan) is resolve_stack_defaults(plan)


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(["fsdp2", "zero3", "megatron_distopt"]), st.integers(1, 64))
def test_a_batch_edit_resolves_to_the_same_sections_but_the_batch(
    strategy: str, micro_batch: int
) -> None:
    """An edit of the batch keeps every other section's object (engine/plan.py
    ``with_values``), and the resolved plan holds the very sections the unedited plan's
    resolution holds (``_batchless``) — the decided parallelism (``tp_style`` and
    ``knobs`` filled in, ``_decided``) among them — but its own batch. An equal layout
    made afresh (another object) resolves to that same decided parallelism too: the
    engine's caches compare sections by identity."""
    plan = with_values(default_plan(), {"parallelism.strategy": strategy})
    edited = with_values(plan, {"batch.micro_batch": micro_batch + 64})
    a, b = resolve_stack_defaults(plan).plan, resolve_stack_defaults(edited).plan
    assert a.batch == plan.batch and b.batch == edited.batch and a.batch != b.batch
    for name, section in a.__dict__.items():
        assert name == "batch" or b.__dict__[name] is section, name
    assert a.parallelism.tp_style != "auto" and plan.parallelism.tp_style == "auto"
    again = with_values(edited, {"parallelism.strategy": strategy})  # new, equal sections
    assert again.parallelism is not plan.parallelism
    assert resolve_stack_defaults(again).plan.parallelism is a.parallelism
