"""Sections (and plans) keep their field hash per object (engine.sections.base): equal
content hashes equally, a copy with one field changed is a new object with its own hash,
and a dead object's entry goes away (a reused id never answers for another object)."""

from __future__ import annotations

import gc

from hypothesis import given
from hypothesis import strategies as st

from engine.plan import Plan, default_plan, with_values
from engine.sections import base


@given(st.integers(min_value=1, max_value=64), st.integers(min_value=1, max_value=64))
def test_hash_follows_content(a: int, b: int) -> None:
    x = with_values(default_plan(), {"batch.grad_accum": a})
    y = with_values(default_plan(), {"batch.grad_accum": b})
    assert (x == y) == (a == b)
    if a == b:
        assert hash(x) == hash(y) and hash(x.batch) == hash(y.batch)
    copied = x.model_copy(update={"batch": y.batch})
    assert copied == y and hash(copied) == hash(y)


def test_dead_objects_leave_the_memo() -> None:
    gc.collect()
    before = len(base._hash_memo)
    plans: list[Plan] = [
        with_values(default_plan(), {"batch.seq_len": 1024 + i}) for i in range(20)
    ]
    for p in plans:
        hash(p)
    assert len(base._hash_memo) >= before + 20
    del plans, p
    gc.collect()
    assert len(base._hash_memo) <= before
