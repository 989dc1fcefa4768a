"""The report agrees with the plan and reads as a document: the chosen layout is the
plan's own when it fits (as the Layouts tab says), rejections that cannot apply to the
model are counted, not listed, every column is labelled, no heading is parted from
what it heads and no page but the last is nearly empty."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QSizeF
from PySide6.QtGui import QAbstractTextDocumentLayout, QTextBlock, QTextDocument

from engine.cli.common import with_model
from engine.layout import Rejected
from engine.layout.shapes import layout_of
from engine.plan import default_plan, with_values
from engine.planfile import PlanFile
from gui.report.builder import ReportDocument, build_document
from gui.report.content import gather
from gui.report.paginate import CHAPTER_ROOM_SHARE, block_rect, lead_bottom
from gui.report.pdf import ReportCancelled, page_px, text_rect, write_pdf
from gui.report.sections.layouts import layouts_section, rejection_kinds
from gui.report.sections.memory import phases_section


def test_chosen_layout_is_the_plans_own_when_it_fits(qapp: Any) -> None:
    """The default plan (DP 8 on one node) fits: the report's chosen layout is DP8 on
    8 GPUs, not the search's first legal TP2 DP2 (4 GPUs, a partial node), which the
    note offers as the way to buy less; a dense model's search proposes no EP
    layouts, so no 'needs a mixture-of-experts model' rejection is listed or counted."""
    html = layouts_section(gather(PlanFile(plan=default_plan(), name="t"), "gb"))
    chosen = html.split("<h2", 2)[1]
    assert "Chosen layout" in chosen and "TP1 PP1 CP1 EP1 DP8" in chosen
    assert "The plan&#x27;s own layout fits on 8 GPUs; the fewest that fit are 4" in chosen
    assert "mixture-of-experts" not in html
    assert "EP &gt; 1" not in html and "EP 2" not in html


def test_rejections_listed_one_per_kind_of_reason() -> None:
    """Reasons that differ only in their numbers are one kind, counted; the first layout
    of each kind is the one listed."""
    cp3, cp5 = (
        layout_of(default_plan()),
        layout_of(with_values(default_plan(), {"parallelism.tp": 2})),
    )
    rejected = [
        Rejected(cp3, ("parallelism.cp (3) must divide the sequence length 4096",)),
        Rejected(cp5, ("parallelism.cp (5) must divide the sequence length 4096",)),
        Rejected(cp5, ("PP 3 is neither a power of two nor an even split of the 32 layers",)),
    ]
    kinds = rejection_kinds(rejected)
    assert [(r.layout, n) for r, n in kinds] == [(cp3, 2), (cp5, 1)]


def test_phase_table_labels_every_column(qapp: Any) -> None:
    html = phases_section(gather(PlanFile(plan=default_plan(), name="t"), "gb"))
    table = html.split("HBM per phase", 1)[1]
    assert "Peak phase" in table and "<th></th>" not in table.split("</table>", 1)[0]


LAYOUT_PLANS: dict[str, dict[str, Any]] = {
    "default": {},
    "pipeline": {"parallelism.pp": 2, "parallelism.dp": 4},
    "moe": {"parallelism.ep": 8},  # on Mixtral 8x7B (below)
}
"""A dense plan, a pipeline plan (the stage chart and table) and a MoE plan (expert rows)."""


@pytest.fixture(scope="module")
def laid_out(qapp: Any) -> dict[str, ReportDocument]:
    size = text_rect(page_px("a4")).size()
    out = {}
    for key, values in LAYOUT_PLANS.items():
        base = with_model(default_plan(), "mixtral-8x7b") if key == "moe" else default_plan()
        pf = PlanFile(plan=with_values(base, values), name=key)
        out[key] = build_document(gather(pf, "both"), size)
    return out


def _headings(report: ReportDocument) -> Iterator[tuple[QTextBlock, QAbstractTextDocumentLayout]]:
    for flow in report.flows:
        block = flow.doc.begin()
        while block.isValid():
            if block.blockFormat().headingLevel() > 0:
                yield block, flow.doc.documentLayout()
            block = block.next()


@pytest.mark.parametrize("key", list(LAYOUT_PLANS))
def test_every_heading_shares_its_page_with_what_it_heads(
    laid_out: dict[str, ReportDocument], key: str
) -> None:
    """A heading, and the first lines of the paragraph or the header and first row of
    the table under it, on one page; a chapter starts with at least 30 % of its page."""
    report = laid_out[key]
    page = report.flows[0].doc.pageSize().height()
    seen = 0
    for block, layout in _headings(report):
        top = block_rect(layout, block).top()
        lead = lead_bottom(layout, block)
        assert lead - top < page, block.text()
        assert (lead - 0.5) // page == top // page, block.text()
        if block.blockFormat().headingLevel() == 1 and top % page > 2:
            assert page - top % page >= CHAPTER_ROOM_SHARE * page, block.text()
        seen += 1
    assert seen > 20


@pytest.mark.parametrize("key", list(LAYOUT_PLANS))
def test_no_page_but_the_last_is_nearly_empty(
    laid_out: dict[str, ReportDocument], key: str
) -> None:
    """Chapters flow on instead of each taking a fresh page: every page but the last is
    at least 60 % full (the default plan's exceptions page was 55 %, its sensitivity
    page 35 %, before)."""
    fill = laid_out[key].page_fill()
    assert len(fill) == laid_out[key].page_count
    assert min(fill[:-1]) >= 0.6, [round(f, 2) for f in fill]


def test_a_lead_is_the_heading_and_its_tables_first_row(qapp: Any) -> None:
    """lead_bottom: a heading, its one-line note and the table's header and first data
    row; not the second row."""
    doc = QTextDocument()
    doc.setHtml(
        "<h2>Head</h2><p>note</p><table><thead><tr><th>a</th></tr></thead>"
        "<tr><td>first</td></tr><tr><td>second</td></tr></table>"
    )
    doc.setPageSize(QSizeF(400, 2000))
    layout = doc.documentLayout()
    blocks = {}
    block = doc.begin()
    while block.isValid():
        blocks[block.text()] = layout.blockBoundingRect(block)
        block = block.next()
    lead = lead_bottom(layout, doc.begin())
    assert lead == blocks["first"].bottom() < blocks["second"].top()


def test_write_pdf_reports_progress_and_can_be_cancelled(qapp: Any, tmp_path: Path) -> None:
    """The export job's progress bar and Cancel: write_pdf tells ``progress`` each page
    painted, and a False answer stops it after that page."""
    c = gather(PlanFile(plan=default_plan(), name="t"), "gb")
    seen: list[tuple[int, int]] = []
    pages = write_pdf(c, tmp_path / "a.pdf", progress=lambda i, n: seen.append((i, n)) or True)
    assert seen == [(i + 1, pages) for i in range(pages)]
    with pytest.raises(ReportCancelled, match="after page 2 of"):
        write_pdf(c, tmp_path / "b.pdf", progress=lambda i, n: i < 2)
