"""Charts in the report as vector graphics inside the text document.

Each chart is drawn once with a bare ``QPainter`` from the window's chart data
(:func:`paint_estimate`, :func:`paint_stages`) into a ``QPicture`` — a recording of
painter commands — and
placed in the ``QTextDocument`` as a custom inline object. When a page is painted the
recording is replayed onto the PDF (or printer) painter, so bars, hatching, lines and
labels stay vectors and the labels stay extractable text. (An SVG detour loses the
hatch pattern of the low–high range; a picture keeps every brush.)
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QObject, QPointF, QRect, QRectF, QSizeF, Qt, QUrl
from PySide6.QtGui import (
    QColor,
    QFont,
    QImage,
    QPainter,
    QPen,
    QPicture,
    QPyTextObject,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextFormat,
)

from engine.units import fmt_gb
from engine.whatif.sensitivity import Bar as TornadoBar
from gui.report.content import ReportContent
from gui.report.html import CHART_SCHEME, INK, MUTED, RULE
from gui.report.sections import DRAWINGS
from gui.views.chart_paint import paint_estimate, paint_stages

CHART_OBJECT = int(QTextFormat.ObjectTypes.UserObject.value) + 1
KEY_PROPERTY = int(QTextFormat.Property.UserProperty.value) + 1
SCALE = 1.5
"""Charts are laid out this much larger than printed, so their 9-pt screen fonts print
at about 6 pt and five phase bars' labels plus two node panels fit the text width."""


@dataclass(frozen=True)
class Recorded:
    picture: QPicture
    size: QSizeF  # the logical size it was drawn at


def _record(width: int, height: int, draw: object) -> Recorded:
    pic = QPicture()
    painter = QPainter(pic)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    draw(painter, QRectF(0, 0, width, height))  # type: ignore[operator]
    painter.end()
    return Recorded(pic, QSizeF(width, height))


def record_chart(key: str, c: ReportContent, width: int, height: int) -> Recorded:
    """Record chart ``key`` (ledger, stages, tornado) for a ``width`` × ``height`` slot."""
    plan, est, units = c.pf.plan, c.est, "gib" if c.units == "gib" else "gb"
    w, h = round(width * SCALE), round(height * SCALE)
    ink = QColor(INK)
    if key == "ledger":
        return _record(w, h, lambda p, r: paint_estimate(p, r, plan, est, units, ink))
    if key == "stages":
        return _record(w, h, lambda p, r: paint_stages(p, r, plan, est, units, ink))
    if key == "tornado":
        return _record(width, height, lambda p, r: draw_tornado(p, r, c.tornado))
    if key in DRAWINGS:
        return _record(width, height, lambda p, r: DRAWINGS[key](c, p, r))
    raise KeyError(f"unknown chart {key!r}")


def draw_tornado(painter: QPainter, rect: QRectF, bars: tuple[TornadoBar, ...]) -> None:
    """Horizontal bars from the peak at each input's low end to its high end, around
    the plan's own peak (the vertical line)."""
    ok = [b for b in bars if b.peak_at_low is not None and b.peak_at_high is not None]
    if not ok:
        return
    ends = [v for b in ok for v in (b.peak_at_low or 0, b.peak_at_high or 0, b.base_peak)]
    lo, hi = min(ends), max(ends)
    span = max(hi - lo, 1)
    label_w, value_w, row_h, top = 190.0, 70.0, 26.0, 22.0
    x0, x1 = rect.left() + label_w + value_w, rect.right() - value_w

    def x(v: int) -> float:
        return x0 + (v - lo) / span * (x1 - x0)

    font = QFont(painter.font())
    font.setPixelSize(10)
    painter.setFont(font)
    painter.setPen(QColor(MUTED))
    base = ok[0].base_peak
    painter.drawText(
        QRectF(x0, 0, x1 - x0, top - 6),
        Qt.AlignmentFlag.AlignCenter,
        f"peak per rank (high), plan: {fmt_gb(base)}",
    )
    for i, b in enumerate(ok):
        y = top + i * row_h
        a, z = b.peak_at_low or 0, b.peak_at_high or 0
        painter.setPen(QColor(INK))
        painter.drawText(QRectF(0, y, label_w - 6, row_h), Qt.AlignmentFlag.AlignVCenter, b.label)
        left, right = sorted((x(a), x(z)))
        painter.fillRect(QRectF(left, y + 5, max(right - left, 1.0), row_h - 10), QColor("#4C78A8"))
        painter.setPen(QColor(MUTED))
        align = Qt.AlignmentFlag.AlignVCenter
        painter.drawText(
            QRectF(left - value_w - 4, y, value_w, row_h),
            align | Qt.AlignmentFlag.AlignRight,
            fmt_gb(min(a, z)),
        )
        painter.drawText(
            QRectF(right + 4, y, value_w, row_h),
            align | Qt.AlignmentFlag.AlignLeft,
            fmt_gb(max(a, z)),
        )
    painter.setPen(QPen(QColor("#D0302F"), 1.2))
    painter.drawLine(QPointF(x(base), top - 4), QPointF(x(base), top + len(ok) * row_h))
    painter.setPen(QPen(QColor(RULE), 0.8))
    painter.drawLine(QPointF(x0, top + len(ok) * row_h), QPointF(x1, top + len(ok) * row_h))


class ChartObject(QPyTextObject):
    """The inline object handler: sizes a chart and replays its recording."""

    def __init__(
        self, charts: dict[str, Recorded], sizes: dict[str, QSizeF], parent: QObject | None = None
    ) -> None:
        super().__init__(parent)
        self.charts, self.sizes = charts, sizes

    def intrinsicSize(self, doc: QTextDocument, pos: int, fmt: QTextFormat) -> QSizeF:
        return self.sizes[str(fmt.property(KEY_PROPERTY))]

    def drawObject(
        self,
        painter: QPainter,
        rect: QRectF | QRect,
        doc: QTextDocument,
        pos: int,
        fmt: QTextFormat,
    ) -> None:
        rec = self.charts[str(fmt.property(KEY_PROPERTY))]
        rect = QRectF(rect)
        if painter.hasClipping():
            # A replayed picture sets its own clips, replacing the page's: draw a chart
            # only on the page where it starts, never bleeding into the next one.
            page = painter.clipBoundingRect()
            if not page.top() - 1 <= rect.top() < page.bottom():
                return
        painter.save()
        painter.translate(rect.topLeft())
        painter.scale(rect.width() / rec.size.width(), rect.height() / rec.size.height())
        painter.drawPicture(0, 0, rec.picture)
        painter.restore()


def has_placeholders(html: str) -> bool:
    """Whether ``html`` holds a chart placeholder (:func:`gui.report.html.chart`): most
    flows of a report hold none, and then neither the placeholders' images nor the walk
    over every fragment of the flow for them (:func:`placeholders`) is needed."""
    return f'src="{CHART_SCHEME}:' in html


def placeholders(doc: QTextDocument) -> list[tuple[int, str, QSizeF]]:
    """Positions, keys and sizes of the chart placeholder images in ``doc``."""
    found = []
    block = doc.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            frag = it.fragment()
            fmt = frag.charFormat()
            if fmt.isImageFormat():
                img = fmt.toImageFormat()
                if img.name().startswith(CHART_SCHEME + ":"):
                    key = img.name().split(":", 1)[1]
                    found.append((frag.position(), key, QSizeF(img.width(), img.height())))
            it += 1
        block = block.next()
    return found


def register_placeholders(doc: QTextDocument, keys: list[str]) -> None:
    """Give each placeholder URL a blank image so loading the HTML stays quiet."""
    blank = QImage(1, 1, QImage.Format.Format_ARGB32)
    blank.fill(Qt.GlobalColor.transparent)
    for key in keys:
        doc.addResource(
            QTextDocument.ResourceType.ImageResource, QUrl(f"{CHART_SCHEME}:{key}"), blank
        )


def embed_charts(
    doc: QTextDocument, c: ReportContent, recorded: dict[str, Recorded] | None = None
) -> ChartObject:
    """Replace every placeholder by its vector chart; returns the handler (keep it).
    ``recorded`` charts (of the same slot size) are used as they are."""
    found = placeholders(doc)
    sizes = {key: sz for _, key, sz in found}
    done = recorded or {}
    charts = {
        key: done[key]
        if key in done
        else record_chart(key, c, round(sz.width()), round(sz.height()))
        for key, sz in sizes.items()
    }
    handler = ChartObject(charts, sizes, doc)  # first: the swaps below are laid out
    doc.documentLayout().registerHandler(CHART_OBJECT, handler)
    cursor = QTextCursor(doc)
    cursor.beginEditBlock()
    for pos, key, _ in reversed(found):
        cursor.setPosition(pos)
        cursor.setPosition(pos + 1, QTextCursor.MoveMode.KeepAnchor)
        fmt = QTextCharFormat()
        fmt.setObjectType(CHART_OBJECT)
        fmt.setProperty(KEY_PROPERTY, key)
        cursor.insertText("\ufffc", fmt)
    cursor.endEditBlock()
    return handler
