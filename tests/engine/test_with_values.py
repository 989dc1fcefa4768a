"""with_values validates what an edit touches and keeps every other section: the
untouched sections are the plan's own objects, a touched one is validated afresh (a bad
value is refused with its field path), the plan's cross-section rules still run on the
whole (a pipeline deeper than the model is refused whichever section changed), and the
result equals the plan rebuilt from scratch."""

from __future__ import annotations

from collections.abc import Callable

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


EDITS = st.dictionaries(
    st.sampled_from(
        [
            "batch.micro_batch",
            "batch.seq_len",
            "parallelism.pp",
            "parallelism.virtual_stages",
            "parallelism.dp",
            "model.architecture.layers",
            "hardware.gpus_per_node",
        ]
    ),
    st.one_of(st.integers(-1, 160), st.just("x"), st.none()),
    min_size=1,
    max_size=3,
)


def _rebuilt(plan: Plan, changes: dict[str, object]) -> Plan:
    """The plan rebuilt by validating the whole of it (the reference)."""
    tree = plan.model_dump(mode="json")
    for path, value in changes.items():
        section, *rest = path.split(".")
        node = tree[section]
        for key in rest[:-1]:
            node = node[key]
        node[rest[-1]] = value
    return Plan.model_validate(tree)


def _outcome(make: Callable[[], Plan]) -> Plan | list[tuple[object, str]]:
    """The plan made, or its validation errors as (field path, message)."""
    try:
        return make()
    except ValidationError as err:
        return [(e["loc"], e["msg"]) for e in err.errors()]


@given(EDITS)
def test_an_edit_equals_the_whole_plan_validated_or_is_refused_alike(
    changes: dict[str, object],
) -> None:
    """with_values validates a touched section by its own class and runs the
    cross-section rules on the plan it puts together (engine/plan.py); a refusal goes
    through the whole plan's validation. Either way the result is the whole plan's:
    the same plan, or the same errors at the same field paths (bad values: 0, −1,
    text, none; pipelines deeper than the layers, virtual stages that do not divide)."""
    plan = with_values(default_plan(), {"parallelism.pp": 2, "parallelism.dp": 4})
    want = _outcome(lambda: _rebuilt(plan, changes))
    got = _outcome(lambda: with_values(plan, changes))
    assert got == want
    if isinstance(got, Plan):
        assert got.model_dump(mode="json") == _rebuilt(plan, changes).model_dump(mode="json")
        touched = {path.split(".")[0] for path in changes}
        assert all(getattr(got, n) is getattr(plan, n) for n in SECTION_ORDER if n not in touched)
