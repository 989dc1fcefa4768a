"""The two-level YAML subset accelerate writes: ``key: scalar`` and one nesting level.

Written and read here without a YAML dependency (PyYAML is only a test extra); the
tests check that PyYAML reads what is written the same way. A string that is not plain is
single-quoted when printable, else double-quoted with every non-printable character
escaped (YAML refuses raw control characters, and folds a raw line break to a space).
"""

from __future__ import annotations

import math
import re
from typing import Any

_RESERVED = ("true", "false", "yes", "no", "on", "off", "null", "none", "~")
_NUMERIC_WORDS = ("inf", "infinity", "nan")
"""Words Python's ``float`` reads as numbers (:func:`read_flat_yaml` would)."""
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
"""A string written unquoted: an ASCII name no YAML resolver reads as a number
(``-1``, ``-0x1f``) or a boolean, nor Python's ``int``/``float`` (``１２``)."""


def _scalar_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return repr(v)
    if isinstance(v, float):
        text = repr(v)  # PyYAML's float needs a dot: 1e-05 would be read as a string
        return text.replace("e", ".0e", 1) if math.isfinite(v) and "." not in text else text
    s = str(v)
    low = s.lower()
    if _PLAIN.fullmatch(s) and low not in _RESERVED and low not in _NUMERIC_WORDS:
        return s
    if s.isprintable():
        return "'" + s.replace("'", "''") + "'"
    return '"' + "".join(_escaped(ch) for ch in s) + '"'


def _escaped(ch: str) -> str:
    """One character of a YAML double-quoted scalar (YAML 1.1/1.2 escapes)."""
    if ch in '\\"':
        return "\\" + ch
    if ch.isprintable():
        return ch
    n = ord(ch)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def to_yaml(cfg: dict[str, Any], header: str = "") -> str:
    """Two-level YAML (keys sorted) after ``header`` (comment lines)."""
    out = []
    for k in sorted(cfg):
        v = cfg[k]
        if isinstance(v, dict):
            out.append(f"{k}:")
            out.extend(f"  {kk}: {_scalar_text(v[kk])}" for kk in sorted(v))
        else:
            out.append(f"{k}: {_scalar_text(v)}")
    return header + "\n".join(out) + "\n"


def read_flat_yaml(text: str) -> dict[str, Any]:
    """Parse the subset :func:`to_yaml` writes (and ``accelerate config`` writes)."""
    out: dict[str, Any] = {}
    current: dict[str, Any] | None = None
    for n, raw in enumerate(text.splitlines(), 1):
        line = _without_comment(raw).rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        indented = line.startswith((" ", "\t"))
        key, sep, val = line.strip().partition(":")
        if not sep:
            raise ValueError(f"line {n}: expected 'key: value'")
        val = val.strip()
        if indented:
            if current is None:
                raise ValueError(f"line {n}: indented key outside a mapping")
            current[key] = _scalar(val)
        elif val == "":
            current = out.setdefault(key, {})
        else:
            current = None
            out[key] = _scalar(val)
    return out


def _without_comment(line: str) -> str:
    """``line`` before its `` #`` comment — one outside quotes (a quoted value may hold
    `` #``): ``''`` continues a single-quoted scalar, ``\\x`` escapes in a double-quoted."""
    i, quote = 0, ""
    while i < len(line):
        ch = line[i]
        if quote == "'" and ch == "'":
            if line[i + 1 : i + 2] == "'":
                i += 1  # '' is a quote inside the scalar
            else:
                quote = ""
        elif quote == '"' and ch == "\\":
            i += 1  # the escaped character cannot close the scalar
        elif quote == '"' and ch == '"':
            quote = ""
        elif not quote and ch in "'\"" and (i == 0 or line[i - 1] in " :"):
            quote = ch
        elif not quote and ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i]
        i += 1
    return line


def _scalar(v: str) -> Any:
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
        if v[0] == "'":
            return v[1:-1].replace("''", "'")
        return _unescape(v[1:-1])
    low = v.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("null", "~", ""):
        return None
    if v == "{}":
        return {}
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return v


def _unescape(body: str) -> str:
    """The inverse of :func:`_escaped` (``\\xNN``, ``\\uNNNN``, ``\\UNNNNNNNN``, an
    escaped quote or backslash)."""
    out, i = [], 0
    widths = {"x": 2, "u": 4, "U": 8}
    while i < len(body):
        ch = body[i]
        if ch != "\\" or i + 1 == len(body):
            out.append(ch)
            i += 1
            continue
        code = body[i + 1]
        width = widths.get(code, 0)
        if width:
            out.append(chr(int(body[i + 2 : i + 2 + width], 16)))
        else:
            out.append(code)
        i += 2 + width
    return "".join(out)
