"""Rejections split into rules and preferences (issue 38: "Rejected" lists mixed them).
The split is checked against the lattice itself: a layout the default preferences reject
is "preference only" exactly when the lattice judged with no preference at all
(``LayoutPreferences.hard_rules_only()``, engine/layout/point.py) accepts it."""

from __future__ import annotations

import pytest

from engine.layout.point import Layout, grouped, is_preference, preference_only
from engine.layout.shapes import LayoutPreferences, enumerate_layouts
from engine.plan import Plan, default_plan, with_values
from engine.presets import plan_for_model_preset


def _key(layout: Layout) -> tuple[int, int, int, int, int]:
    return layout.tp, layout.pp, layout.cp, layout.ep, layout.dp


PLANS = {
    "8b": default_plan(),
    "8b-short-seq": with_values(default_plan(), {"batch.seq_len": 2048}),
    "70b": plan_for_model_preset("llama-3.1-70b"),
}


@pytest.mark.parametrize("name", sorted(PLANS))
@pytest.mark.parametrize("world", [6, 12, 16, 24])
def test_preference_only_matches_the_rules_only_lattice(name: str, world: int) -> None:
    plan: Plan = PLANS[name]
    strict = enumerate_layouts(plan, world)
    rules_only = enumerate_layouts(plan, world, LayoutPreferences.hard_rules_only())
    runnable = {_key(x) for x in rules_only.legal}
    for r in strict.rejected:
        assert preference_only(r) == (_key(r.layout) in runnable), r.reasons
    for r in rules_only.rejected:  # a rule's wording never reads as a preference
        assert not any(is_preference(x) for x in r.reasons), r.reasons


def test_both_groups_occur_and_keep_order() -> None:
    # 12 ranks of the default plan (Llama 3.1 8B, seq 4,096, 32 layers): CP 3 does not
    # divide 4,096 — a rule (engine.legality); PP 3 splits 32 layers 11/11/10 — it runs,
    # the pp_regular preference only asks for a power of two or an even split.
    lattice = enumerate_layouts(default_plan(), 12)
    rules, prefs = grouped(lattice.rejected)
    assert len(rules) + len(prefs) == len(lattice.rejected)
    assert any(r.layout.cp == 3 and r.layout.pp == 1 for r in rules)
    assert any(r.layout.pp == 3 and r.layout.cp == 1 for r in prefs)
    assert all(preference_only(p) for p in prefs)
    where = {id(r): i for i, r in enumerate(lattice.rejected)}
    assert [where[id(r)] for r in rules] == sorted(where[id(r)] for r in rules)
