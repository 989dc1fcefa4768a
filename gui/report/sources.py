"""Numbered citations: each row's source key becomes ``[n]``, listed once with its title."""

from __future__ import annotations

from engine.sources import describe
from gui.report.html import esc


class Citations:
    """Numbers source keys in order of first use, for a ledger's footnote list."""

    def __init__(self) -> None:
        self.keys: list[str] = []

    def ref(self, key: str) -> str:
        if not key:
            return ""
        if key not in self.keys:
            self.keys.append(key)
        return f"[{self.keys.index(key) + 1}]"

    def html(self) -> str:
        """The list of cited sources, expanded with :func:`engine.sources.describe`."""
        if not self.keys:
            return ""
        items = "".join(
            f'<tr><td width="5%" valign="top">[{i}]</td><td><span class="mono">{esc(k)}</span>'
            f" — {esc(describe(k))}</td></tr>"
            for i, k in enumerate(self.keys, start=1)
        )
        return (
            '<h3>Sources</h3><table width="100%" cellspacing="0" cellpadding="1" '
            f'style="font-size: 7pt">{items}</table>'
        )
