"""with_values validates what an edit touches and keeps every other section: the
untouched sections are the plan's own objects, a touched one is validated afresh (a bad
value is refused with its field path), the plan's cross-section rules still run on the
whole (a pipeline deeper than the model is refused whichever section changed), and the
result equals the plan rebuilt from scratch."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from engine.plan import SECTION_ORDER, Plan, default_plan, with_values


@given(st.integers(1, 64), st.sampled_from([512, 2048, 8192]))
def test_untouched_sections_are_kept_and_the_result_equals_a_rebuild(
    micro_batch: int, seq_len: int
) -> None:
    plan = default_plan()
    got = with_values(plan, {"batch.micro_batch": micro_batch, "batch.seq_len": seq_len})
    assert all(getattr(got, n) is getattr(plan, n) for n in SECTION_ORDER if n != "batch")
    assert (got.batch.micro_batch, got.batch.seq_len) == (micro_batch, seq_len)
    tree = plan.model_dump(mode="json")
    tree["batch"].update(micro_batch=micro_batch, seq_len=seq_len)
    assert got == Plan.model_validate(tree)
    assert got.model_dump(mode="json") == Plan.model_validate(tree).model_dump(mode="json")


def test_a_touched_section_is_validated() -> None:
    with pytest.raises(ValidationError) as err:
        with_values(default_plan(), {"batch.micro_batch": 0})
    assert err.value.errors()[0]["loc"][:2] == ("batch", "micro_batch")


def test_cross_section_rules_run_on_the_whole_plan() -> None:
    """A pipeline deeper than the model's layers is refused when either side changes."""
    plan = default_plan()
    layers = plan.model.architecture.layers
    with pytest.raises(ValidationError):
        with_values(plan, {"parallelism.pp": layers + 1})
    deep = with_values(plan, {"parallelism.pp": 4, "parallelism.dp": 2})
    with pytest.raises(ValidationError):
        with_values(deep, {"model.architecture.layers": 2})


def test_unknown_paths_are_refused() -> None:
    with pytest.raises(KeyError):
        with_values(default_plan(), {"batch.no_such_field": 1})
    with pytest.raises(KeyError):
        with_values(default_plan(), {"no_such_section.x": 1})


def test_every_plan_field_is_a_section_with_values_carries() -> None:
    """with_values rebuilds a plan from SECTION_ORDER alone: a Plan field outside it
    would silently fall back to its default on every edit."""
    assert set(SECTION_ORDER) == set(Plan.model_fields)
