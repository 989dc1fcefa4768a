"""Page-break rules ``QTextDocument`` lacks, applied to a laid-out report.

QTextDocument knows only "always break before". A report set that way starts every
chapter on a fresh page, so a short chapter leaves most of its page blank; and it has no
keep-with-next, so a heading can end a page while its table starts the next. Both rules
here work on the laid-out document: a heading that would be parted from the start of
what it heads (a paragraph's first lines, a table's header and first row) moves to the
next page, and a chapter (a level-1 heading) flows on after the previous one unless
less than :data:`CHAPTER_ROOM_SHARE` of the page is left. Each move re-lays out the
document below the moved heading (one flow of the report: see :mod:`gui.report.builder`),
so the scan goes on from there.
"""

from __future__ import annotations

from PySide6.QtCore import QRectF
from PySide6.QtGui import (
    QAbstractTextDocumentLayout,
    QTextBlock,
    QTextCursor,
    QTextDocument,
    QTextFormat,
)

CHAPTER_ROOM_SHARE = 0.3
"""A chapter heading starts a new page when less than this share of the page is left:
at most 30 % of a page stays blank before a chapter, and a chapter never starts as a
line or two at the foot of a page."""

LEAD_LINES = 2
"""Lines of a long paragraph that must share the page with the heading above it."""
SHORT_PARAGRAPH_LINES = 3
"""A paragraph of at most this many lines (a note under a heading) travels whole with
the heading, and what follows it (usually the table it introduces) joins the lead."""
LEAD_BLOCKS = 80
"""Blocks looked at after a heading (a table's header and first row are a block per
cell): bounds the scan of a wide table."""

_AT_PAGE_TOP = 2.0
"""A heading this close (96-dpi px) below a page's top already starts that page."""


def block_rect(layout: QAbstractTextDocumentLayout, block: QTextBlock) -> QRectF:
    """Where ``block`` really is (document px). ``blockBoundingRect`` puts the block at
    its layout's position, but a line pushed to the next page (a chart that did not fit)
    sits lower in the layout: the layout's own bounding rectangle says by how much."""
    rect = layout.blockBoundingRect(block)
    text = block.layout()
    if text is not None and text.lineCount():
        rect.translate(0, text.boundingRect().top())
    return rect


def _line_bottom(layout: QAbstractTextDocumentLayout, block: QTextBlock, lines: int) -> float:
    """The bottom of ``block``'s first ``lines`` lines, or of the whole block."""
    text = block.layout()
    if text is None or text.lineCount() <= lines:
        return block_rect(layout, block).bottom()
    return layout.blockBoundingRect(block).top() + text.lineAt(lines - 1).rect().bottom()


def lead_bottom(
    layout: QAbstractTextDocumentLayout, heading: QTextBlock, whole_row: bool = False
) -> float:
    """The bottom (document px) of what must stay on ``heading``'s page: the heading,
    any sub-heading and short note right after it (not the next heading of its own
    rank or above), and then the first lines of the next
    paragraph or the header and first row of the next table: its first lines, or
    (``whole_row``) all of it — rows.py never cuts a table at its first row."""
    bottom = block_rect(layout, heading).bottom()
    own_level = heading.blockFormat().headingLevel()
    block, table_seen = heading.next(), False
    for _ in range(LEAD_BLOCKS):
        if not block.isValid():
            break
        table = QTextCursor(block).currentTable()
        if table is not None:
            if table.cellAt(block.position()).row() > table.format().headerRowCount():
                break  # the header and first data row are in
            table_seen = True
            cell = (
                block_rect(layout, block).bottom()
                if whole_row
                else _line_bottom(layout, block, LEAD_LINES)
            )
            bottom = max(bottom, cell)
        elif table_seen:
            break  # a one-row table, all of it in
        elif (level := block.blockFormat().headingLevel()) > 0:
            if level <= own_level:
                break  # the next section of the same rank: this one had no body
            bottom = block_rect(layout, block).bottom()
        elif block.length() > 1:  # an empty block carries nothing (e.g. after a table)
            text = block.layout()
            bottom = _line_bottom(layout, block, LEAD_LINES)
            if text is not None and text.lineCount() > SHORT_PARAGRAPH_LINES:
                break
        block = block.next()
    return bottom


def must_move(
    layout: QAbstractTextDocumentLayout, block: QTextBlock, page: float, chapter: bool = True
) -> bool:
    """Whether heading ``block`` belongs on the next page: it would be parted from its
    lead, or (``chapter``: a level-1 heading that is not the report's first) it would
    start a chapter with less than :data:`CHAPTER_ROOM_SHARE` of its page left."""
    top = block_rect(layout, block).top()
    offset = top % page
    if offset < _AT_PAGE_TOP:
        return False  # moving it would only leave a blank page
    lead = lead_bottom(layout, block, whole_row=True)
    if (lead - 0.5) // page != top // page and page - offset > CHAPTER_ROOM_SHARE * page:
        # the whole first row would leave over 30 % of the page blank: only its lead lines
        lead = lead_bottom(layout, block)
    if lead - top > page - _AT_PAGE_TOP:
        return False  # taller than a page: it is split wherever it starts
    if (lead - 0.5) // page != top // page:
        return True
    opens = chapter and block.blockFormat().headingLevel() == 1
    return opens and page - offset < CHAPTER_ROOM_SHARE * page


def apply_page_rules(doc: QTextDocument) -> int:
    """Move each heading of ``doc`` that :func:`must_move` wants on the next page;
    returns how many moved. A heading set to break before already starts its page.

    Headings are blocks of the document's top level, so the walk steps over each table
    as one item instead of visiting its cells (most of a report's blocks)."""
    page = doc.pageSize().height()
    layout = doc.documentLayout()
    moved = 0
    item = doc.rootFrame().begin()
    while not item.atEnd():
        block = item.currentBlock()
        fmt = block.blockFormat() if block.isValid() else None
        if (
            fmt is not None
            and fmt.headingLevel() > 0
            and not fmt.pageBreakPolicy()
            and block.next().isValid()
            and must_move(layout, block, page)
        ):
            fmt.setPageBreakPolicy(QTextFormat.PageBreakFlag.PageBreak_AlwaysBefore)
            QTextCursor(block).setBlockFormat(fmt)  # re-lays out from here down
            moved += 1
        item += 1
    return moved
