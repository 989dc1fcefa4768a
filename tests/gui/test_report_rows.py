"""Table rows kept whole on one page (gui/report/rows.py): a row of the Inputs appendix
(or any table with a header) never has lines on two pages."""

from __future__ import annotations

import re
from typing import Any

from PySide6.QtCore import QSizeF
from PySide6.QtGui import QTextCursor, QTextDocument

from engine.plan import default_plan
from engine.planfile import PlanFile
from gui.report.builder import build_document
from gui.report.content import gather
from gui.report.html import table
from gui.report.paginate import CHAPTER_ROOM_SHARE, block_rect
from gui.report.pdf import page_px, text_rect
from gui.report.rows import fixed_columns, split_before_row, straddling_row

PAGE = QSizeF(300, 300)


def _rows_by_block(doc: QTextDocument) -> dict[tuple[int, int], tuple[float, float]]:
    """(table's first position, row) → (top, bottom) of its lines, found block by block
    (not through the table's cells, as the code under test does)."""
    layout = doc.documentLayout()
    out: dict[tuple[int, int], tuple[float, float]] = {}
    block = doc.begin()
    while block.isValid():
        tab = QTextCursor(block).currentTable()
        if (
            tab is not None
            and tab.format().headerRowCount()
            and tab.parentFrame() == doc.rootFrame()
            and fixed_columns(tab)
        ):
            key = (tab.firstPosition(), tab.cellAt(block.position()).row())
            rect = block_rect(layout, block)
            lo, hi = out.get(key, (rect.top(), rect.bottom()))
            out[key] = (min(lo, rect.top()), max(hi, rect.bottom()))
        block = block.next()
    return out


def _split_rows(doc: QTextDocument) -> list[tuple[int, int]]:
    """Rows (not a table's first) across a page boundary that a move would not leave
    more than CHAPTER_ROOM_SHARE of a page blank behind."""
    page = doc.pageSize().height()
    return [
        key
        for key, (top, bottom) in _rows_by_block(doc).items()
        if key[1] > 1
        and top // page != (bottom - 0.5) // page
        and page - top % page <= CHAPTER_ROOM_SHARE * page
    ]


def _doc(html: str) -> QTextDocument:
    doc = QTextDocument()
    doc.setPageSize(PAGE)
    doc.setHtml(html)
    doc.documentLayout()
    doc.idealWidth()
    return doc


ROWS = [[f"r{i}", "word " * (8 + 10 * (i % 3))] for i in range(30)]
"""Rows of one to five lines on a 300 × 300 px page: Qt splits one across a boundary."""


def test_split_keeps_every_row_and_repeats_the_header() -> None:
    html = "<p>intro</p>" + table(["Field", "Meaning"], ROWS, [30, 70])
    out = split_before_row(html, 0, 5)
    assert (
        out.count('<thead><tr><th width="30%">Field</th><th width="70%">Meaning</th></tr></thead>')
        == 2
    )
    assert out.count("page-break-before: always") == 1
    first, second = out.split("page-break-before: always")
    assert "r3<" in first and "r4<" not in first  # table row 5 is body row 4 (r4)
    assert [f"r{i}<" in second for i in range(4, 30)] == [True] * 26
    assert out.replace(first, "").count("<tr>") == 1 + 26  # header again, then r4…r29


def test_a_row_across_a_page_moves_whole_to_the_next_page(qapp: Any) -> None:
    """The synthetic table splits rows as Qt lays it out; cut where the first one
    crosses, that row starts the next page under the repeated header, and cutting
    until none crosses keeps every row, in order."""
    html = "<p>intro</p>" + table(["Field", "Meaning"], ROWS, [30, 70])
    doc = _doc(html)
    assert _split_rows(doc), "the fixture should split a row"
    found = straddling_row(doc)
    assert found is not None
    html = split_before_row(html, *found)
    again = _doc(html)
    rows = _rows_by_block(again)
    second = max(k[0] for k in rows)
    top = rows[(second, 1)][0]
    assert top % PAGE.height() < 40  # just below the header at the page's top
    for _ in range(10):
        found = straddling_row(again)
        if found is None:
            break
        html = split_before_row(html, *found)
        again = _doc(html)
    assert _split_rows(again) == []
    assert [int(n) for n in re.findall(r"\br(\d+)\b", again.toPlainText())] == list(range(30))


def test_no_table_row_of_the_default_report_crosses_a_page(qapp: Any) -> None:
    """The whole report, laid out for A4: every row with a header above it (the Inputs
    appendix, the ledger, the phases…) on one page."""
    content = gather(PlanFile(plan=default_plan(), name="rows"), "both")
    report = build_document(content, text_rect(page_px("a4")).size())
    split = [(i, key) for i, flow in enumerate(report.flows) for key in _split_rows(flow.doc)]
    assert split == []
    assert all(straddling_row(flow.doc) is None for flow in report.flows)


def test_a_tables_first_row_stays_whole_with_its_heading(qapp: Any) -> None:
    """The heading rule (gui/report/paginate.must_move) keeps a heading with its
    table's header and whole first row, unless moving them would leave over 30 % of the
    page blank (then the first lines only): in the default report the Stack section's one
    row ("name", with a six-line Meaning) once began at the foot of a page and ended at
    the top of the next, its field name left behind."""
    content = gather(PlanFile(plan=default_plan(), name="rows"), "both")
    report = build_document(content, text_rect(page_px("a4")).size())
    for flow in report.flows:
        page = flow.doc.pageSize().height()
        for (_, row), (top, bottom) in _rows_by_block(flow.doc).items():
            if row == 1 and bottom - top < page:
                assert top // page == (bottom - 0.5) // page, (top, bottom, page)
