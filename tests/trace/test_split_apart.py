"""A classification difference is shown as such (issue 38: the trace view flagged
"activations −19.7 %" and "logits +50 %" while their sum was +0.8 %). The tracker counts
the fp32 logits saved for the loss's backward as activations, the ledger in its logits
group (engine/trace/compare.py): the two groups are judged by their sum's row, and their
own rows say "split apart" with the figure in parentheses, never as a red error."""

from __future__ import annotations

from engine.estimate import estimate
from engine.plan import default_plan
from engine.trace.compare import SKEWED, Line, compare
from engine.trace.text import render
from tests.trace.test_records import fake_result

SUM = " + ".join(SKEWED)


def test_the_pair_is_judged_by_its_sum() -> None:
    cmp = compare(fake_result(), estimate(default_plan()))
    by_name = {g.name: g for g in cmp.groups}
    assert SUM in by_name and not by_name[SUM].split_apart
    for name in SKEWED:
        assert by_name[name].judged_in == SUM and by_name[name].split_apart
    others = [g for g in cmp.groups if g.name not in (*SKEWED, SUM)]
    assert others and not any(g.split_apart for g in others)
    text = render(fake_result(), cmp, "gb")
    for name in SKEWED:
        row = next(x for x in text.splitlines() if x.strip().startswith(name + " "))
        assert row.endswith(f"split apart: see {SUM}") and "ABOVE" not in row


def test_views_word_a_split_group_apart(qapp: object) -> None:
    from PySide6.QtGui import QColor

    from gui.report.sections.trace_results import line_row
    from gui.views.trace_paint import value_color

    # traced 1,000 B against a ledger of 1,150–1,250 B: mid 1,200 → +20.0 % (outside).
    alone = Line("activations", 1000, 1150, 1250)
    split = Line("activations", 1000, 1150, 1250, judged_in=SUM)
    assert line_row(alone)[3:] == ["+20.0 %", "below"]
    assert line_row(split)[3:] == ["(+20.0 %)", f"split apart: see {SUM}"]
    fg = QColor("#000000")
    assert value_color(alone, fg) != fg and value_color(split, fg) == fg
