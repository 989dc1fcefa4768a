"""The report agrees with the plan and reads as a document: the chosen layout is the
plan's own when it fits (as the Layouts tab says), rejections that cannot apply to the
model are counted, not listed, every column is labelled, and no heading ends a page."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QSizeF

from engine.plan import default_plan
from engine.planfile import PlanFile
from gui.report.builder import HEADING_ROOM, build_document
from gui.report.content import gather
from gui.report.pdf import page_px, text_rect
from gui.report.sections.layouts import layouts_section
from gui.report.sections.memory import phases_section


def test_chosen_layout_is_the_plans_own_when_it_fits(qapp: Any) -> None:
    """The default plan (DP 8 on one node) fits: the report's chosen layout is DP8 on
    8 GPUs, not the search's first legal DP4; a dense model's search proposes no EP
    layouts, so no 'needs a mixture-of-experts model' rejection is listed or counted."""
    html = layouts_section(gather(PlanFile(plan=default_plan(), name="t"), "gb"))
    chosen = html.split("<h2", 2)[1]
    assert "Chosen layout" in chosen and "TP1 PP1 CP1 EP1 DP8" in chosen
    assert "The plan&#x27;s own layout fits: 8 GPUs to buy." in chosen
    assert "mixture-of-experts" not in html
    assert "EP &gt; 1" not in html and "EP 2" not in html


def test_phase_table_labels_every_column(qapp: Any) -> None:
    html = phases_section(gather(PlanFile(plan=default_plan(), name="t"), "gb"))
    table = html.split("HBM per phase", 1)[1]
    assert "Peak phase" in table and "<th></th>" not in table.split("</table>", 1)[0]


def test_no_heading_ends_a_page(qapp: Any) -> None:
    """Every heading block has at least HEADING_ROOM px of its page below it."""
    report = build_document(
        gather(PlanFile(plan=default_plan(), name="t"), "both"), text_rect(page_px("a4")).size()
    )
    doc = report.doc
    page = doc.pageSize().height()
    layout = doc.documentLayout()
    block, headings = doc.begin(), 0
    while block.isValid():
        if block.blockFormat().headingLevel() > 0 and block.next().isValid():
            bottom = layout.blockBoundingRect(block).bottom()
            assert page - bottom % page >= HEADING_ROOM, block.text()
            headings += 1
        block = block.next()
    assert headings > 20 and isinstance(doc.pageSize(), QSizeF)
