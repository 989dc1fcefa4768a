"""with_fields builds what ``model_copy(update=...)`` builds — the same fields, the same
fields-set record, equal and hashing alike, a new object — for any section of a plan and
any of its fields replaced, without pydantic's generic copy (the layout search lays a
plan out hundreds of times a search)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from engine.models.presets import preset_names
from engine.plan import SECTION_ORDER, Plan, with_fields
from engine.presets import plan_for_model_preset
from engine.sections.base import Section

PLANS = [plan_for_model_preset(name) for name in preset_names()[:6]]


def _same_copy(got: Section, want: Section) -> None:
    assert type(got) is type(want)
    assert got.__dict__ == want.__dict__
    assert list(got.__dict__) == list(want.__dict__)  # the fields in their order
    assert got.__pydantic_fields_set__ == want.__pydantic_fields_set__
    assert got.__pydantic_extra__ == want.__pydantic_extra__
    assert got.__pydantic_private__ == want.__pydantic_private__
    assert got == want and hash(got) == hash(want)
    assert got.model_dump(mode="json") == want.model_dump(mode="json")
    assert got.model_dump(exclude_unset=True) == want.model_dump(exclude_unset=True)


@given(st.sampled_from(PLANS), st.sampled_from(SECTION_ORDER), st.data())
def test_with_fields_is_model_copy(plan: Plan, name: str, data: st.DataObject) -> None:
    """A section's fields replaced by another plan's values (valid ones: with_fields
    validates nothing, as model_copy does not), and the plan's section replaced."""
    node: Section = getattr(plan, name)
    other: Section = getattr(data.draw(st.sampled_from(PLANS)), name)
    keys = data.draw(st.lists(st.sampled_from(sorted(type(node).model_fields)), unique=True))
    update = {k: getattr(other, k) for k in keys}
    got = with_fields(node, update)
    assert got is not node
    _same_copy(got, node.model_copy(update=update))
    _same_copy(with_fields(plan, {name: got}), plan.model_copy(update={name: got}))
    assert node.__dict__ == getattr(plan, name).__dict__  # the original untouched
