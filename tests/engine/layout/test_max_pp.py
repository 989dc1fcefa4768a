"""``policy.max_pp``: the deepest pipeline the search proposes (default 16, the depth
DeepSeek-V3 and Llama 3 405B train with). Without it the search happily proposed PP 21
for DeepSeek-V3 (63 = 61 layers + embedding + head ÷ 21 is a "regular" split)."""

from __future__ import annotations

from engine.layout.counts import gpu_counts
from engine.layout.point import Layout
from engine.layout.shapes import LayoutPreferences, check, legal_shapes
from engine.plan import default_plan, with_values

PREFS = LayoutPreferences()


def test_the_default_cap_is_sixteen() -> None:
    assert default_plan().policy.max_pp == 16


def test_a_pp_deeper_than_the_cap_is_refused_with_its_reason() -> None:
    """Llama-3.1-8B has 32 layers: PP 32 is regular (one layer a stage) but deeper than 16."""
    plan = default_plan()
    got = check(plan, 1, 32, 1, 1, 1, PREFS)
    assert not isinstance(got, Layout)
    assert any("deeper than policy.max_pp = 16" in r for r in got.reasons)
    assert isinstance(check(plan, 1, 16, 1, 1, 1, PREFS), Layout)


def test_raising_the_cap_lets_the_search_go_deeper() -> None:
    plan = with_values(default_plan(), {"policy.max_pp": 32})
    assert isinstance(check(plan, 1, 32, 1, 1, 1, PREFS), Layout)
    assert 32 in {s.pp for s in legal_shapes(plan, 64, PREFS)}
    assert max(s.pp for s in legal_shapes(default_plan(), 64, PREFS)) == 16


def test_the_plans_own_pp_is_never_refused_by_the_cap() -> None:
    """A user who set PP 32 chose it; the cap bounds what the search proposes."""
    plan = with_values(default_plan(), {"parallelism.pp": 32, "parallelism.dp": 1})
    assert isinstance(check(plan, 1, 32, 1, 1, 1, PREFS), Layout)


def test_hard_rules_only_ignores_the_cap() -> None:
    """The brute-force lattice (legality alone) lists PP 32 as legal."""
    got = check(default_plan(), 1, 32, 1, 1, 1, LayoutPreferences.hard_rules_only())
    assert isinstance(got, Layout)


def test_the_counts_respect_the_cap_and_say_it() -> None:
    """With max_pp 1 nothing the search returns is pipelined, and the reasons name it."""
    plan = with_values(default_plan(), {"policy.max_pp": 1, "policy.max_gpus": 64})
    c = gpu_counts(plan, budget_s=None)
    layouts = [c.first_layout.layout, c.arithmetic_min.layout, *(a.layout for a in c.alternatives)]
    assert all(lay is not None and lay.pp == 1 for lay in layouts)
    assert "PP ≤ 1 (policy.max_pp)" in c.arithmetic_min.reason
