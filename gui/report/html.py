"""HTML building blocks for the report, within what ``QTextDocument`` renders.

QTextDocument supports a subset of HTML 4 and CSS: tables with borders,
cell padding and background colours, font sizes and colours, and ``page-break-before``.
Every table gets a header row (``<thead>``); the PDF writer marks it as a repeating
header so a table that spans pages repeats its column names.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from engine.units import UnitChoice, fmt_range, to_gb, to_gib

CHART_SCHEME = "memplan-chart"
"""URL scheme of chart placeholders; the PDF builder swaps them for vector objects."""
CHART_WIDTH = 640
"""Chart placeholders are laid out at this width (96-dpi px), about the text width."""

INK = "#1d232b"
MUTED = "#5d6673"
RULE = "#b7bfca"
HEAD_BG = "#e6ebf1"
ACCENT = "#1f4e79"
VERDICT_COLORS = {"fits": "#1e7b34", "straddles": "#b36b00", "does_not_fit": "#b3261e"}

STYLE = f"""
body {{ color: {INK}; }}
h1 {{ color: {ACCENT}; margin-top: 16px; margin-bottom: 6px; }}
h2 {{ color: {ACCENT}; margin-top: 12px; margin-bottom: 4px; }}
h3 {{ margin-top: 8px; margin-bottom: 3px; }}
p {{ margin-top: 2px; margin-bottom: 5px; }}
table.grid td, table.grid th {{ padding: 2px 4px; }}
table.grid th {{ background-color: {HEAD_BG}; font-weight: bold; text-align: left; }}
td.num, th.num {{ text-align: right; white-space: nowrap; }}
.small {{ font-size: 7pt; color: {MUTED}; }}
.muted {{ color: {MUTED}; }}
.mono {{ font-family: 'DejaVu Sans Mono', monospace; }}
.default {{ color: {MUTED}; font-style: italic; }}
.set {{ font-weight: bold; }}
pre {{ font-family: 'DejaVu Sans Mono', monospace; font-size: 7pt; }}
"""


_BIDI_CONTROLS = dict.fromkeys(range(0x202A, 0x202F)) | dict.fromkeys(range(0x2066, 0x206A))
"""Unicode's explicit embeddings, overrides and isolates (LRE…RLO, LRI…PDI): one in a
plan name would reverse the text after it on paper, so the report drops them."""


def without_bidi_controls(text: str) -> str:
    """``text`` as plain characters, for the page header and PDF title too."""
    return text.translate(_BIDI_CONTROLS)


def esc(text: object) -> str:
    return escape(without_bidi_controls(str(text)), quote=True)


GRID_BORDER_PX = 0.5
"""Table rules (96-dpi px), drawn by each cell and the table frame: a separated-border
table. CSS ``border-collapse`` looks the same but costs QTextDocument about twice the
layout and painting time (every shared edge is resolved between its two cells), and
the report has some three thousand cells."""


def table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    widths: Sequence[int] | None = None,
    numeric: set[int] | None = None,
    font_pt: float = 7.5,
) -> str:
    """A bordered table with a header row; cells are HTML already (escape first).

    ``widths`` are percentages of the text width; ``numeric`` columns align right.
    """
    numeric = numeric or set()
    w = list(widths) if widths else [0] * len(headers)

    def cell(tag: str, i: int, body: str) -> str:
        attrs = f' width="{w[i]}%"' if w[i] else ""
        cls = ' class="num"' if i in numeric else ""
        return f"<{tag}{attrs}{cls}>{body}</{tag}>"

    head = "".join(cell("th", i, h) for i, h in enumerate(headers))
    body = "".join(
        "<tr>" + "".join(cell("td", i, c) for i, c in enumerate(r)) + "</tr>" for r in rows
    )
    return (
        f'<table class="grid" width="100%" cellspacing="0" cellpadding="2" '
        f'border="{GRID_BORDER_PX}" style="border-style: solid; border-color: {RULE}; '
        f'font-size: {font_pt}pt"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table>"
    )


def kv_table(pairs: Sequence[tuple[str, str]], key_width: int = 28) -> str:
    """Two columns, label and value, without a header (summary boxes)."""
    rows = "".join(
        f'<tr><td width="{key_width}%" class="muted">{k}</td><td>{v}</td></tr>' for k, v in pairs
    )
    return (
        f'<table width="100%" cellspacing="0" cellpadding="2" style="font-size: 8.5pt">'
        f"{rows}</table>"
    )


def chart(key: str, width: int, height: int) -> str:
    """A placeholder the PDF builder replaces with the vector chart ``key``."""
    return (
        f'<p align="center"><img src="{CHART_SCHEME}:{key}" width="{width}" height="{height}"></p>'
    )


def size(low: int, high: int, units: UnitChoice) -> str:
    return esc(fmt_range(low, high, units))


def gb_range(low: int, high: int) -> str:
    if low == high:
        return f"{to_gb(low):,.2f}"
    return f"{to_gb(low):,.2f}–{to_gb(high):,.2f}"


def gib_range(low: int, high: int) -> str:
    if low == high:
        return f"{to_gib(low):,.2f}"
    return f"{to_gib(low):,.2f}–{to_gib(high):,.2f}"


HEADING_PT = {1: 14.0, 2: 11.0, 3: 9.5}
"""Heading sizes, set inline: QTextDocument's own heading sizes ignore the style sheet."""


def heading(level: int, text: str, anchor: str = "", new_page: bool = False) -> str:
    style = f"font-size: {HEADING_PT[level]}pt"
    if new_page:
        style += "; page-break-before: always"
    name = f'<a name="{anchor}"></a>' if anchor else ""
    return f'<h{level} style="{style}">{name}{esc(text)}</h{level}>'


def figures_table(rows: Sequence[tuple[str, int, int]], units: UnitChoice) -> str:
    """Named byte ranges: the rounded size and the exact low and high bytes."""
    body = [[esc(label), size(lo, hi, units), f"{lo:,}", f"{hi:,}"] for label, lo, hi in rows]
    return table(
        ["Figure", "Size", "Low (B)", "High (B)"],
        body,
        [34, 30, 18, 18],
        numeric={2, 3},
        font_pt=7.5,
    )
