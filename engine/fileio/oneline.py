"""Plan text made safe to show as one printable line (issue 33).

A plan's free text (``model.name``, a file's name, a message quoting them) reaches
places where a line break or a control character means something else: a comment in a
generated shell script or Python file (a newline ends the comment and the rest runs),
the terminal (escape sequences), a PDF's Title. :func:`one_line` is the one rule: every
character that ``str.splitlines()``, a shell, a YAML reader or a terminal would treat as
a line break or a control becomes a space (line separators, C0/C1 controls, DEL) or
goes (format characters such as the bidi overrides of "Trojan Source", lone surrogates
that no UTF-8 file can hold, the noncharacters U+FFFE/U+FFFF that YAML refuses).
"""

from __future__ import annotations

import unicodedata

_AS_SPACE = frozenset({"Cc", "Zl", "Zp"})
"""Controls (\\n \\r \\v \\f NUL U+0085 …) and the line / paragraph separators."""
_DROPPED = frozenset({"Cf", "Cs"})
"""Format characters (bidi overrides, zero-width joiners) and lone surrogates."""


def _clean(ch: str) -> str:
    if ord(ch) & 0xFFFE == 0xFFFE:  # U+FFFE, U+FFFF and their kin in every plane
        return ""
    cat = unicodedata.category(ch)
    if cat in _AS_SPACE:
        return " "
    return "" if cat in _DROPPED else ch


def one_line(text: str, limit: int | None = None) -> str:
    """``text`` as one printable line: each control or line break a space, format
    characters dropped, ends stripped; cut to ``limit`` characters with an ellipsis."""
    out = text if text.isprintable() else "".join(_clean(ch) for ch in text)
    out = out.strip()
    if limit is not None and len(out) > limit:
        out = out[: limit - 1] + "…"
    return out


def docstring_text(text: str) -> str:
    """``text`` as one line that can stand inside a ``\"\"\"…\"\"\"`` Python docstring
    and mean itself: backslashes and double quotes escaped, so no quote can close the
    string and no backslash can start an escape (``\\N{`` would not even compile)."""
    return one_line(text).replace("\\", "\\\\").replace('"', '\\"')
