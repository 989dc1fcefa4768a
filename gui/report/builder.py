"""The report as one ``QTextDocument``: HTML sections, then the vector charts.

The document is laid out for a page's text area in 96-dpi pixels (what ``QPdfWriter``
uses at resolution 96), so chart sizes, fonts and page breaks come out the same on the
PDF and on a printer; :mod:`gui.report.pdf` paints it page by page.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QBuffer, QIODevice, QSizeF
from PySide6.QtGui import QFont, QPdfWriter, QTextCursor, QTextDocument, QTextFormat

from gui.report.charts import ChartObject, Recorded, embed_charts, register_placeholders
from gui.report.content import ReportContent
from gui.report.html import HEADING_PT, STYLE
from gui.report.sections import DRAWINGS, SECTIONS

BODY_FONT_PT = 8.5
FONT_FAMILIES = ["DejaVu Sans", "Helvetica", "Arial"]


def report_html(c: ReportContent) -> str:
    """Every section, in reading order."""
    body = "".join(section(c) for section in SECTIONS)
    for level, pt in HEADING_PT.items():  # bare headings get the report's sizes
        body = body.replace(f"<h{level}>", f'<h{level} style="font-size: {pt}pt">')
    return "<html><body>" + body + "</body></html>"


@dataclass
class ReportDocument:
    """A laid-out report: the document, its chart handler and its layout device
    (both must live as long as the document is painted)."""

    doc: QTextDocument
    charts: ChartObject
    device: QPdfWriter
    buffer: QBuffer

    @property
    def page_count(self) -> int:
        return self.doc.pageCount()


def build_document(
    c: ReportContent, text_size: QSizeF, recorded: dict[str, Recorded] | None = None
) -> ReportDocument:
    """Lay out the report for a text area of ``text_size`` (96-dpi px); charts
    ``recorded`` beforehand (:func:`record_screen_charts`) are used as they are. Every
    chart is a bare QPainter drawing, so this runs on any thread."""
    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    device = QPdfWriter(buffer)  # never painted: it only fixes the layout at 96 dpi
    device.setResolution(96)
    doc = QTextDocument()
    font = QFont()
    font.setFamilies(FONT_FAMILIES)
    font.setStyleHint(QFont.StyleHint.SansSerif)
    font.setPointSizeF(BODY_FONT_PT)
    for tag in ("liga", "clig"):  # "offload", not "o\ufb04oad", when text is searched
        font.setFeature(QFont.Tag(tag), 0)
    doc.setDefaultFont(font)
    doc.setDocumentMargin(0)
    doc.setDefaultStyleSheet(STYLE)
    register_placeholders(doc, ["ledger", "stages", "tornado", *DRAWINGS])
    doc.setHtml(report_html(c))
    # No layout exists yet (one is made on first use): the charts are swapped in, then
    # the layout made for the 96-dpi device and the page, so the document is laid out
    # once with charts in place, not once for the HTML and again for the swaps.
    charts = embed_charts(doc, c, recorded)
    doc.documentLayout().setPaintDevice(device)
    doc.setPageSize(text_size)
    # All of it now (a large document is otherwise laid out lazily, and some blocks
    # never were).
    doc.idealWidth()
    keep_headings_with_next(doc)
    return ReportDocument(doc, charts, device, buffer)


HEADING_ROOM = 70.0
"""A heading needs this much page below it (96-dpi px: a paragraph's first lines or a
table's header and two rows); with less it would end its page alone, so it starts the
next one instead."""


def keep_headings_with_next(doc: QTextDocument, rounds: int = 8) -> int:
    """Move each heading that would end a page alone to the top of the next page
    (``QTextDocument`` has no keep-with-next); returns how many were moved."""
    page = doc.pageSize().height()
    layout = doc.documentLayout()
    moved = 0
    for _ in range(rounds):
        block, again = doc.begin(), False
        while block.isValid():
            fmt = block.blockFormat()
            if fmt.headingLevel() > 0 and not fmt.pageBreakPolicy():
                rect = layout.blockBoundingRect(block)
                room = page - (rect.bottom() % page)
                if room < HEADING_ROOM and block.next().isValid():
                    fmt.setPageBreakPolicy(QTextFormat.PageBreakFlag.PageBreak_AlwaysBefore)
                    QTextCursor(block).setBlockFormat(fmt)
                    moved, again = moved + 1, True
                    break  # the layout below has moved: measure again from the start
            block = block.next()
        if not again:
            break
        # (the next round measures; blockBoundingRect lays out what it asks for)
    return moved
