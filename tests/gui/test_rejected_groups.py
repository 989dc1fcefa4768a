"""The Layouts tab and the report list rejected layouts in two groups: those a rule
refuses (they cannot run) and those only a preference refuses (they would run) — issue
38 "Rejected lists mix preferences with rules"."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt

from engine.layout.point import PREFERENCES_TITLE, RULES_TITLE, Layout, Rejected, grouped


def test_the_list_has_a_header_per_group(qtbot: Any, window: Any) -> None:
    # seq 1,026 tokens: CP 4 does not divide it (a rule, engine.legality); CP 2 leaves
    # 513 tokens per rank, under the 1,024 the cp_min_tokens preference asks (it runs).
    window.doc.set("batch.seq_len", 1026, merge=False)
    view = window.workbench.layouts
    qtbot.waitUntil(lambda: view.choice is not None and not window.doc.pending, timeout=60_000)
    qtbot.waitUntil(lambda: view.choice.rejected != (), timeout=60_000)
    rules, prefs = grouped(view.choice.rejected)
    items = [view.rejected.item(i) for i in range(view.rejected.count())]
    headers = [i.text() for i in items if i.flags() == Qt.ItemFlag.NoItemFlags]
    expected = [
        f"{t}: {len(g):,}" for t, g in ((RULES_TITLE, rules), (PREFERENCES_TITLE, prefs)) if g
    ]
    assert headers == expected and len(headers) == 2
    texts = [i.text() for i in items]
    for r in prefs:  # every preference-only layout sits below the preference header
        line = f"  {r.layout.label()}: {'; '.join(r.reasons)}"
        assert texts.index(line) > texts.index(f"{PREFERENCES_TITLE}: {len(prefs):,}")


def test_grouping_of_hand_made_rejections() -> None:
    rule = Rejected(
        Layout(1, 1, 3, 1, 4),
        ("parallelism.cp (3) must divide the sequence length 4096 (batch.seq_len)",),
    )
    pref = Rejected(
        Layout(16, 1, 1, 1, 1), ("TP 16 does not fit evenly inside one node of 8 GPUs",)
    )
    both = Rejected(
        Layout(3, 1, 1, 1, 4), ("TP 3 must divide 32 heads", "TP 3 is not a power of two")
    )
    assert grouped([pref, rule, both]) == ([rule, both], [pref])


def test_the_report_lists_the_groups_apart(qapp: Any) -> None:
    """The same plan as above (seq 1,026): the report's layouts page has one table per
    group, rules first, each headed with its count."""
    from engine.plan import default_plan, with_values
    from engine.planfile import PlanFile
    from gui.report.content import gather
    from gui.report.sections.layouts import layouts_section

    plan = with_values(default_plan(), {"batch.seq_len": 1026})
    html = layouts_section(gather(PlanFile(plan=plan, name="t"), "gb"))
    rules_at, prefs_at = (
        html.find(f"<h4>{RULES_TITLE}: 1 layout,"),
        html.find(f"<h4>{PREFERENCES_TITLE}: 3 layouts,"),
    )
    assert 0 < rules_at < prefs_at
