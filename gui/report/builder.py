"""The report as a chain of ``QTextDocument`` flows: HTML sections, then the vector charts.

Each flow is laid out for a page's text area in 96-dpi pixels (what ``QPdfWriter`` uses
at resolution 96), so chart sizes, fonts and page breaks come out the same on the PDF
and on a printer; :mod:`gui.report.pdf` paints them page by page.

Why a chain and not one document: a page rule (:mod:`gui.report.paginate`) that moves
a heading makes QTextDocument lay out everything below it again, and in one document
that is the rest of the report, once per move. The report is cut before its level-1
and level-2 headings into flows of a page or so; a flow starts where the previous one
ended (below a spacer as tall as the part of the page above it), so a move re-lays out
one flow, and the report is laid out about once in all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from PySide6.QtCore import QBuffer, QIODevice, QSizeF
from PySide6.QtGui import QFont, QPdfWriter, QTextBlockFormat, QTextCursor, QTextDocument

from gui.report.charts import (
    ChartObject,
    Recorded,
    embed_charts,
    has_placeholders,
    register_placeholders,
)
from gui.report.content import ReportContent
from gui.report.html import HEADING_PT, STYLE
from gui.report.paginate import apply_page_rules, block_rect
from gui.report.rows import split_before_row, straddling_row
from gui.report.sections import DRAWINGS, SECTIONS

BODY_FONT_PT = 8.5
FONT_FAMILIES = ["DejaVu Sans", "Helvetica", "Arial"]

SHORT_PIECE_CHARS = 600
"""A piece of HTML between two headings this short, without a table or chart (a heading
and a note), joins the next piece's flow: it must stay with what follows it."""
ROW_CUTS = 40
"""Table rows one flow may move to the next page (a page or so of a long table: a cut
each page boundary it crosses); past it a row is left split as Qt lays it out."""
_CUT = re.compile(r"(?=<h[12][ >])")
FIXED_HEIGHT = QTextBlockFormat.LineHeightTypes.FixedHeight.value


def report_html(c: ReportContent) -> str:
    """Every section, in reading order."""
    body = "".join(section(c) for section in SECTIONS)
    for level, pt in HEADING_PT.items():  # bare headings get the report's sizes
        body = body.replace(f"<h{level}>", f'<h{level} style="font-size: {pt}pt">')
    return body


def flow_pieces(body: str) -> list[str]:
    """``body`` cut before each level-1 and level-2 heading, short pieces joined to the
    next (see :data:`SHORT_PIECE_CHARS`)."""
    out: list[str] = []
    pending = ""
    for piece in _CUT.split(body):
        pending += piece
        if "<table" in pending or "<img" in pending or len(pending) > SHORT_PIECE_CHARS:
            out.append(pending)
            pending = ""
    if pending:
        out.append(pending)
    return out


@dataclass
class Flow:
    """One laid-out flow: its y = 0 is the top of report page ``first_page`` (0-based)."""

    doc: QTextDocument
    first_page: int
    charts: ChartObject

    @property
    def last_page(self) -> int:
        return self.first_page + self.doc.pageCount() - 1


@dataclass
class ReportDocument:
    """A laid-out report: its flows, with their chart handlers, and the layout device
    (all must live as long as the report is painted)."""

    flows: list[Flow]
    device: QPdfWriter
    buffer: QBuffer

    @property
    def page_count(self) -> int:
        return self.flows[-1].last_page + 1

    def flows_on(self, page: int) -> list[Flow]:
        """The flows with something on ``page`` (0-based)."""
        return [f for f in self.flows if f.first_page <= page <= f.last_page]

    def page_fill(self) -> list[float]:
        """How far down each page its content reaches, as a share of the text height
        (the page model the layout checks read: a near-empty page shows here)."""
        page = self.flows[0].doc.pageSize().height()
        reach = [0.0] * self.page_count
        for flow in self.flows:
            layout = flow.doc.documentLayout()
            block = flow.doc.begin()
            if block.blockFormat().lineHeightType() == FIXED_HEIGHT:
                block = block.next()  # the spacer: the previous flow's part of the page
            while block.isValid():
                rect = block_rect(layout, block)
                local = int(rect.top() // page)
                bottom = min(rect.bottom(), (local + 1) * page) - local * page
                i = flow.first_page + local
                reach[i] = max(reach[i], bottom / page)
                block = block.next()
        return reach


def _report_font() -> QFont:
    font = QFont()
    font.setFamilies(FONT_FAMILIES)
    font.setStyleHint(QFont.StyleHint.SansSerif)
    font.setPointSizeF(BODY_FONT_PT)
    for tag in ("liga", "clig"):  # "offload", not "o\ufb04oad", when text is searched
        font.setFeature(QFont.Tag(tag), 0)
    return font


SPACER = '<p style="margin: 0px">&nbsp;</p>'
"""The first block of a flow that starts part-way down a page: its line is as tall as
the part of the page above the flow. (A root-frame top margin would be repeated on
every page of the flow; a first block's own top margin is dropped.)"""


def _set_spacer(doc: QTextDocument, height: float) -> None:
    block = doc.begin()
    fmt = block.blockFormat()
    fmt.setLineHeight(height, FIXED_HEIGHT)
    QTextCursor(block).setBlockFormat(fmt)


class _Flows:
    """Makes the flows one after another, each starting where the last one ended."""

    def __init__(self, c: ReportContent, text_size: QSizeF, recorded: dict[str, Recorded]):
        self.c, self.size, self.recorded = c, text_size, recorded
        self.page = text_size.height()
        self.buffer = QBuffer()
        self.buffer.open(QIODevice.OpenModeFlag.WriteOnly)
        # never painted: it only fixes the layout at 96 dpi
        self.device = QPdfWriter(self.buffer)
        self.device.setResolution(96)
        self.font = _report_font()
        self.flows: list[Flow] = []
        self.page_no, self.offset = 0, 0.0  # where the next flow starts

    def add(self, html: str) -> None:
        """Lay ``html`` out as the next flow; a table row it leaves across a page
        boundary cuts its table there and the flow is laid out again
        (:mod:`gui.report.rows`), at most :data:`ROW_CUTS` times."""
        doc, charts = self._lay_out(html)
        for _ in range(ROW_CUTS):
            found = straddling_row(doc)
            if found is None:
                break
            html = split_before_row(html, *found)
            doc, charts = self._lay_out(html)
        self.flows.append(Flow(doc, self.page_no, charts))
        end = doc.documentLayout().documentSize().height()
        pages = int(end // self.page)
        self.page_no += pages
        self.offset = end - pages * self.page

    def _lay_out(self, html: str) -> tuple[QTextDocument, ChartObject]:
        doc = QTextDocument()
        doc.setDefaultFont(self.font)
        doc.setDocumentMargin(0)
        doc.setDefaultStyleSheet(STYLE)
        drawn = has_placeholders(html)
        if drawn:
            register_placeholders(doc, ["ledger", "stages", "tornado", *DRAWINGS])
        doc.setPageSize(self.size)
        spaced = self.offset > 0
        doc.setHtml("<html><body>" + (SPACER if spaced else "") + html + "</body></html>")
        if spaced:
            _set_spacer(doc, self.offset)
        # The layout is made here, on first use, for the 96-dpi device and the page
        # already set: once. (Made first by anything else, it lays the flow out for the
        # screen and again for the device.) Swapping the charts in afterwards re-lays
        # out only their lines.
        doc.documentLayout().setPaintDevice(self.device)
        charts = embed_charts(doc, self.c, self.recorded) if drawn else ChartObject({}, {}, doc)
        self.recorded.update(charts.charts)
        apply_page_rules(doc)  # walks down the flow, laying it out as it goes
        doc.idealWidth()  # and the rest of it (a layout is otherwise lazy)
        return doc, charts


def build_document(
    c: ReportContent,
    text_size: QSizeF,
    recorded: dict[str, Recorded] | None = None,
    html: str | None = None,
) -> ReportDocument:
    """Lay out the report for a text area of ``text_size`` (96-dpi px); charts
    ``recorded`` beforehand are used as they are. Not on a Python worker thread of the
    window: the documents connect signals as they are made, which can deadlock with the
    GUI thread (see :mod:`gui.report.paint_process`); the window paints in a child
    process, the command line on its only thread. ``html``: :func:`report_html` of
    ``c``, made beforehand (the window makes it with the figures, where the engine's
    caches are warm), or made here."""
    flows = _Flows(c, text_size, dict(recorded or {}))
    for piece in flow_pieces(report_html(c) if html is None else html):
        flows.add(piece)
    return ReportDocument(flows.flows, flows.device, flows.buffer)
