"""Table rows kept whole on one page: the page rule ``QTextDocument`` lacks for tables.

QTextDocument breaks a table between two lines of a row: a long "Meaning" cell of the
Inputs appendix ends one page and goes on at the top of the next, under the repeated
header, and the row's field name is left behind on the first page. Qt moves a row to
the next page only when none of its cells has a line left above the page's foot.

So a flow laid out with a row across a page boundary is cut there, in its HTML: the
table ends before that row and goes on in a copy of the table (its header row
repeated, as Qt repeats it) set to start a page. :mod:`gui.report.builder` lays the
flow out again until no row crosses a boundary. A row taller than a page is split
wherever it starts, a table whose columns size to their content is left as it is
(:func:`fixed_columns`), and so is a row that would leave more than
:data:`~gui.report.paginate.CHAPTER_ROOM_SHARE` of its page blank (a ledger row with a
long formula: the page would end mostly empty); a table's first row stays where the
heading rule put it (the header is never left alone at a page's foot).
"""

from __future__ import annotations

import re
from bisect import bisect_left

from PySide6.QtGui import QAbstractTextDocumentLayout, QTextDocument, QTextLength, QTextTable

from gui.report.paginate import CHAPTER_ROOM_SHARE, block_rect

_THEAD = "<thead>"
_TABLE_OPEN = re.compile(r"<table\b[^>]*>")
_STYLE = re.compile(r'style="')


def _row_top(layout: QAbstractTextDocumentLayout, table: QTextTable, row: int) -> float:
    """The top of a row's first line in any cell: the cells' tops do not always align —
    when Qt splits a row at a page boundary one cell's first line can go to the next
    page (below the repeated header) while another's stays, and the row then reads as
    starting below the boundary it crosses."""
    return _row_span(layout, table, row)[0]


def _row_span(
    layout: QAbstractTextDocumentLayout, table: QTextTable, row: int
) -> tuple[float, float]:
    """The top of a row's first lines and the bottom of its last ones (document px)."""
    top, bottom = float("inf"), float("-inf")
    for col in range(table.columns()):
        cell = table.cellAt(row, col)
        first = cell.firstCursorPosition().block()
        last = cell.lastCursorPosition().block()
        top = min(top, block_rect(layout, first).top())
        bottom = max(bottom, block_rect(layout, last).bottom())
    return top, bottom


def fixed_columns(table: QTextTable) -> bool:
    """Whether ``table``'s column widths are its own, not its content's: every column
    has a width and no column keeps its lines unbroken (``white-space: nowrap``, the
    numeric columns). Only such a table can be cut: the two parts of another one would
    each size their columns to their own rows, and neither would look like the table
    (nor keep the rows above the cut where they were laid out)."""
    widths = table.format().columnWidthConstraints()
    if len(widths) != table.columns():
        return False
    if any(w.type() == QTextLength.Type.VariableLength for w in widths):
        return False
    header = (table.cellAt(0, c).firstCursorPosition().block() for c in range(table.columns()))
    return not any(block.blockFormat().nonBreakableLines() for block in header)


def straddling_row(doc: QTextDocument) -> tuple[int, int] | None:
    """The first row of ``doc`` to move: it crosses a page boundary, fits on one page,
    leaves at most :data:`CHAPTER_ROOM_SHARE` of its page blank when moved and is not
    its table's first row; as (which table with a header row, counted from 0 in
    document order; its row index), or None. Only tables of the document's top level
    with :func:`fixed_columns` are looked at (a table nested in a cell moves with its
    row)."""
    page = doc.pageSize().height()
    layout = doc.documentLayout()
    tables = [f for f in doc.rootFrame().childFrames() if isinstance(f, QTextTable)]
    headed = [t for t in tables if t.format().headerRowCount() > 0]
    for ordinal, table in enumerate(headed):
        frame = layout.frameBoundingRect(table)
        if frame.top() // page == (frame.bottom() - 0.5) // page or not fixed_columns(table):
            continue  # on one page (no row of it crosses a boundary), or not to be cut
        rows = range(table.format().headerRowCount() + 1, table.rows())  # not the first
        for boundary in range(int(frame.top() // page) + 1, int(frame.bottom() // page) + 1):
            # the row holding the boundary: the last to start above it (tops only grow)
            at = bisect_left(rows, boundary * page, key=lambda r: _row_top(layout, table, r))
            if not at:
                continue  # the boundary falls in the header or the first row
            row = rows[at - 1]
            top, bottom = _row_span(layout, table, row)
            crosses = bottom > boundary * page + 0.5
            movable = bottom - top < page and page - top % page <= CHAPTER_ROOM_SHARE * page
            if crosses and movable:
                return ordinal, row
    return None


def split_before_row(html: str, ordinal: int, row: int) -> str:
    """``html`` with its ``ordinal``-th table that has a header cut before table row
    ``row`` (the header row is row 0): the rest goes on in a table with the same
    attributes and header, set to start a new page."""
    at = -1
    for _ in range(ordinal + 1):
        at = html.index(_THEAD, at + 1)
    opening = [m for m in _TABLE_OPEN.finditer(html, 0, at)][-1]
    head_end = html.index("</thead>", at) + len("</thead>")
    head = html[at:head_end]
    body = html.index("<tbody>", head_end) + len("<tbody>")
    cut = body
    for _ in range(row - 1):  # past the body rows that stay
        cut = html.index("</tr>", cut) + len("</tr>")
    tag = opening.group(0)
    if _STYLE.search(tag):
        again = _STYLE.sub('style="page-break-before: always; ', tag, count=1)
    else:
        again = tag[:-1] + ' style="page-break-before: always">'
    return html[:cut] + "</tbody></table>" + again + head + "<tbody>" + html[cut:]
