"""Paint the report page by page onto a PDF writer or a printer.

``QTextDocument.print`` would add its own page numbers and margins; painting each page
ourselves gives the running header (plan name and config hash) and "Page i of N", and
keeps the chart sizes the document was laid out with. Everything is drawn in 96-dpi
page coordinates and scaled to the device, so a 600-dpi printer gets the same pages.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Literal

from PySide6.QtCore import QMarginsF, QPointF, QRectF, QSizeF, Qt
from PySide6.QtGui import (
    QAbstractTextDocumentLayout,
    QColor,
    QFont,
    QPagedPaintDevice,
    QPageLayout,
    QPageSize,
    QPainter,
    QPalette,
    QPdfWriter,
    QPen,
)

from engine.fileio.atomic import refuse_special
from engine.fileio.oneline import one_line
from gui.report.builder import FONT_FAMILIES, ReportDocument, build_document
from gui.report.charts import Recorded
from gui.report.content import ReportContent
from gui.report.html import INK, MUTED, RULE

PageName = Literal["a4", "letter"]
Progress = Callable[[int, int], bool]
"""Told (page done, pages) after each page; returning False stops the painting."""


class ReportCancelled(Exception):
    """The user cancelled the report while it was painted."""


PAGE_SIZES: dict[str, QPageSize.PageSizeId] = {
    "a4": QPageSize.PageSizeId.A4,
    "letter": QPageSize.PageSizeId.Letter,
}
DPI = 96.0
MM = DPI / 25.4
MARGIN_SIDE, MARGIN_TOP, MARGIN_BOTTOM = 17 * MM, 21 * MM, 18 * MM
"""Text-area margins; the header and footer sit inside the top and bottom ones."""


def page_px(page: PageName) -> QSizeF:
    """The full page in 96-dpi pixels."""
    return QPageSize(PAGE_SIZES[page]).sizePixels(int(DPI)).toSizeF()


def text_rect(full: QSizeF) -> QRectF:
    """The text area. Whole pixels: the layout paginates in 26.6 fixed point, and a
    fractional page height drifts from the page rectangles painted here until a page
    break lands a hair short of its page and the rest of the document is not laid out."""
    return QRectF(
        round(MARGIN_SIDE),
        round(MARGIN_TOP),
        int(full.width() - 2 * MARGIN_SIDE),
        int(full.height() - MARGIN_TOP - MARGIN_BOTTOM),
    )


def _small_font(pt: float) -> QFont:
    font = QFont()
    font.setFamilies(FONT_FAMILIES)
    font.setPointSizeF(pt)
    for tag in ("liga", "clig"):
        font.setFeature(QFont.Tag(tag), 0)
    return font


def _furniture(painter: QPainter, c: ReportContent, full: QSizeF, page: int, pages: int) -> None:
    """Running header (plan name, config hash) and footer (version, Page i of N)."""
    area = text_rect(full)
    painter.setFont(_small_font(7))
    painter.setPen(QColor(MUTED))
    head = QRectF(area.left(), MARGIN_TOP - 11 * MM, area.width(), 5 * MM)
    left = Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignBottom
    right = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignBottom
    name = painter.fontMetrics().elidedText(
        one_line(c.plan_name), Qt.TextElideMode.ElideRight, int(area.width() * 0.6)
    )
    painter.drawText(head, left, f"MemPlan report — {name}")
    painter.drawText(head, right, f"config {c.est.config_hash[:16]}")
    painter.setPen(QPen(QColor(RULE), 0.6))
    y = head.bottom() + 1.5 * MM
    painter.drawLine(QPointF(area.left(), y), QPointF(area.right(), y))
    foot = QRectF(area.left(), area.bottom() + 6 * MM, area.width(), 5 * MM)
    painter.drawLine(
        QPointF(area.left(), foot.top() - 1 * MM), QPointF(area.right(), foot.top() - 1 * MM)
    )
    painter.setPen(QColor(MUTED))
    painter.drawText(foot, left, f"MemPlan {c.app_version} · generated {c.generated}")
    painter.setPen(QColor(INK))
    painter.drawText(foot, right, f"Page {page} of {pages}")


def paint(
    report: ReportDocument,
    c: ReportContent,
    device: QPagedPaintDevice,
    full: QSizeF,
    progress: Progress | None = None,
) -> int:
    """Paint every page of ``report`` onto ``device``; returns the page count.
    ``progress`` returning False raises :class:`ReportCancelled` after that page."""
    area = text_rect(full)
    pages = report.page_count
    painter = QPainter(device)
    if not painter.isActive():
        raise OSError("cannot paint on the output (is the file writable?)")
    try:
        scale = device.logicalDpiX() / DPI
        origin = device.pageLayout().paintRect(QPageLayout.Unit.Point).topLeft()
        ctx = QAbstractTextDocumentLayout.PaintContext()
        palette = QPalette()
        palette.setColor(QPalette.ColorRole.Text, QColor(INK))
        ctx.palette = palette
        for i in range(pages):
            if i:
                device.newPage()
            painter.save()
            painter.scale(scale, scale)
            painter.translate(-origin.x() * DPI / 72, -origin.y() * DPI / 72)
            for flow in report.flows_on(i):
                local = i - flow.first_page  # the flow's own page number
                painter.save()
                painter.translate(area.left(), area.top() - local * area.height())
                clip = QRectF(0, local * area.height(), area.width(), area.height())
                painter.setClipRect(clip)
                # a block starting exactly at the next page's top touches this clip's
                # edge: keep it off this page (its text would be clipped, yet extractable)
                ctx.clip = clip.adjusted(0, 0, 0, -0.5)
                flow.doc.documentLayout().draw(painter, ctx)
                painter.restore()
            _furniture(painter, c, full, i + 1, pages)
            painter.restore()
            if progress is not None and not progress(i + 1, pages):
                raise ReportCancelled(f"cancelled after page {i + 1} of {pages}")
    finally:
        painter.end()
    return pages


def write_pdf(
    c: ReportContent,
    path: str | Path,
    page: PageName = "a4",
    recorded: dict[str, Recorded] | None = None,
    progress: Progress | None = None,
    html: str | None = None,
) -> int:
    """Write the report to ``path`` as a PDF; returns the number of pages; on the
    process's main thread (see :func:`gui.report.builder.build_document`, which also
    says what ``html`` is). Charts ``recorded`` beforehand are used as they are;
    ``progress`` is told each page painted, and stops the painting (see :func:`paint`)."""
    refuse_special(path)  # Qt would write into a FIFO or a device as into a file
    full = page_px(page)
    report = build_document(c, text_rect(full).size(), recorded, html)
    writer = QPdfWriter(str(path))
    writer.setResolution(int(DPI))
    writer.setPageSize(QPageSize(PAGE_SIZES[page]))
    writer.setPageMargins(QMarginsF(0, 0, 0, 0))
    writer.setTitle(f"MemPlan report — {one_line(c.plan_name)}")  # one line: PDF metadata
    writer.setCreator(f"MemPlan {c.app_version}")
    return paint(report, c, writer, full, progress)


def print_report(c: ReportContent, printer: QPagedPaintDevice, html: str | None = None) -> int:
    """Print on a configured printer (from QPrintDialog) at its own page size (``html``:
    as for :func:`write_pdf`)."""
    full = printer.pageLayout().fullRectPoints().size().toSizeF() * (DPI / 72)
    report = build_document(c, text_rect(full).size(), html=html)
    return paint(report, c, printer, full)
