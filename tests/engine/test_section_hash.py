"""Sections (and plans) keep their field hash per object, in a slot of their own
(engine.sections.base): equal content hashes equally, a copy with one field changed is a
new object with its own hash. Architecture specs keep theirs in a memo whose dead
objects' entries go away (a reused id never answers for another object)."""

from __future__ import annotations

import gc

from hypothesis import given
from hypothesis import strategies as st

from engine.plan import Plan, default_plan, with_fields, with_values
from engine.sections import base

MOE = {"num_experts": 4, "top_k": 2, "expert_intermediate": 32}


@given(st.integers(min_value=1, max_value=64), st.integers(min_value=1, max_value=64))
def test_hash_follows_content(a: int, b: int) -> None:
    x = with_values(default_plan(), {"batch.grad_accum": a})
    y = with_values(default_plan(), {"batch.grad_accum": b})
    assert (x == y) == (a == b)
    if a == b:
        assert hash(x) == hash(y) and hash(x.batch) == hash(y.batch)
    copied = x.model_copy(update={"batch": y.batch})
    assert copied == y and hash(copied) == hash(y)


def test_a_copy_hashes_its_own_fields() -> None:
    """The slot is outside the fields: a copy with another batch does not inherit the
    original's hash (it would then share its cache entries), and equal content still
    hashes equally."""
    plan = default_plan()
    batch = plan.batch.model_copy(update={"micro_batch": plan.batch.micro_batch + 1})
    hash(plan), hash(plan.batch)
    other = plan.model_copy(update={"batch": batch})
    assert hash(other.batch) != hash(plan.batch) and other != plan
    assert hash(other) == hash(with_values(plan, {"batch.micro_batch": batch.micro_batch}))
    assert "_field_hash" not in plan.__dict__ and plan.model_dump() == default_plan().model_dump()


def test_dead_objects_leave_the_memo() -> None:
    gc.collect()
    before = len(base._hash_memo)
    plans: list[Plan] = [
        with_values(default_plan(), {"model.architecture.layers": 2 + i}) for i in range(20)
    ]
    for p in plans:
        hash(p)
    assert len(base._hash_memo) >= before + 20
    del plans, p
    gc.collect()
    assert len(base._hash_memo) <= before


@given(st.integers(min_value=1, max_value=64), st.integers(min_value=1, max_value=64))
def test_architecture_hash_follows_content(a: int, b: int) -> None:
    """The architecture spec (the key of the placement and state caches) keeps its hash
    per object too: equal specs hash equally, a spec with another field is unequal, and
    an MoE spec inside is part of the content."""
    arch = default_plan().model.architecture
    x = arch.model_copy(update={"layers": a})
    y = arch.model_copy(update={"layers": b})
    assert (x == y) == (a == b)
    if a == b:
        assert hash(x) == hash(y)
    moe = with_values(default_plan(), {"model.architecture.moe": MOE}).model.architecture
    assert moe.moe is not None
    other = moe.model_copy(update={"moe": moe.moe.model_copy(update={"top_k": 1})})
    assert moe != other and len({moe, other}) == 2
    assert hash(other) == hash(other.model_copy())


BUILDS = ("validated", "with_fields", "model_copy", "construct", "new_plan")


@given(st.integers(min_value=1, max_value=64), st.sampled_from(BUILDS))
def test_every_build_hashes_alike(n: int, how: str) -> None:
    """A validated section's slot starts marked "not hashed" (``base.UNHASHED``, set by
    ``Section.model_post_init``); ``with_fields`` marks a plan it builds; ``model_copy``
    and ``model_construct`` leave the slot empty. However built, equal content hashes
    equally, and no hash is the mark (a -1 read back would be recomputed for ever)."""
    plan = default_plan()
    want = with_values(plan, {"batch.micro_batch": n})  # validated batch, with_fields plan
    assert base._HASH_SLOT.__get__(want.batch) == base.UNHASHED  # marked, not yet hashed
    assert base._HASH_SLOT.__get__(want) == base.UNHASHED
    batch = {
        "validated": lambda: type(plan.batch).model_validate(
            {**plan.batch.__dict__, "micro_batch": n}
        ),
        "with_fields": lambda: with_fields(plan.batch, {"micro_batch": n}),
        "model_copy": lambda: plan.batch.model_copy(update={"micro_batch": n}),
        "construct": lambda: type(plan.batch).model_construct(
            **{**plan.batch.__dict__, "micro_batch": n}
        ),
        "new_plan": lambda: Plan.model_validate(want.model_dump()).batch,
    }[how]()
    got = (
        with_fields(plan, {"batch": batch})
        if how != "model_copy"
        else plan.model_copy(update={"batch": batch})
    )
    assert got == want and hash(got.batch) == hash(want.batch) and hash(got) == hash(want)
    assert base.UNHASHED not in (hash(got), hash(got.batch), base._HASH_SLOT.__get__(got))
