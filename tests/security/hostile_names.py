"""Hostile plan text for the export injection suite (issue 33): a fixed list, so the CI
run is fast and every failure names its case.

Each string carries a payload that creates :data:`export_sandbox.MARKER` in the folder
the generated file runs in, if any part of it ever runs as shell or Python: a line break
of every kind ``str.splitlines()`` / Python / bash know, docstring and string closers,
command substitution, a command separator, ``export`` lines meant for ``--check``'s old
environment parser, backslashes (a ``\\N{`` does not even compile in a docstring),
format braces, terminal escapes, a bidi override, the longest name (a lone surrogate the
plan itself refuses).
"""

from __future__ import annotations

from export_sandbox import MARKER

SH = f"touch {MARKER}"
PY = f"__import__('os').system('touch {MARKER}')"

HOSTILE: dict[str, str] = {
    "newline": f"X\n{SH}\n{PY}\n#",
    "cr": f"X\r{PY}\r{SH}",
    "crlf": f"X\r\n{PY}\r\n{SH}",
    "u2028": f"X\u2028{PY}",
    "u2029": f"X\u2029{PY}",
    "vt": f"X\x0b{PY}",
    "ff": f"X\x0c{PY}",
    "nel": f"X\x85{PY}",
    "nul": f"X\x00{PY}",
    "file-sep": f"X\x1c{PY}\x1d{PY}\x1e{PY}",
    "triple-double": f'X"""\n{PY}\n"""',
    "escaped-triple": f'X\\"""\n{PY}\n#',
    "triple-single": f"X'''\n{PY}\n'''",
    "subshell": f"$({SH})",
    "backticks": f"`{SH}`",
    "semicolon": f"x; {SH}; rm -rf ~/nothing-here",
    "and": f"x && {SH} #",
    "export": f"X\nexport BASH_ENV=./{MARKER}\nexport LD_PRELOAD=./{MARKER}.so\n{SH}",
    "backslash": "\\",
    "backslash-newline": f"x\\\n{SH}",
    "named-escape": "\\N{",
    "hex-escape": "\\x",
    "quotes": f"'\"'; {SH}; '\"",
    "format-braces": "{}{0}{name}{plan.model.name!r}{{",
    "terminal": "\x1b]0;title\x07\x1b[2J\x1b[31mred",
    "bidi": f"\u202e{PY}\u2066",
    "yaml": f"x: !!python/object/apply:os.system ['touch {MARKER}']",
    "long": ("A" * 150 + f"\n{SH}\n" + "B" * 200)[:200],
}
"""Case name → hostile string (≤ 200 characters: ``model.name``'s limit)."""

FREE_TEXT_FIELDS: dict[str, int] = {
    "model.name": 200,
    "model.preset": 200,
    "runtime.framework_version": 100,
    "method.custom.roles": 200,
    "model.hf_config": 200,
}
"""The plan's free-text fields (dotted path → the length used): any string a plan file
may hold (``roles`` a tuple of them, ``hf_config`` a JSON object, keys and values).
``hardware.accelerator`` (a catalogue key), ``parallelism.pp_layout`` (a parsed layout)
and the ``runtime.*_version`` fields (digits and dots) are validated; the Megatron shell
test covers the layouts."""

VALIDATED_TEXT_FIELDS = frozenset(
    {
        "hardware.accelerator",
        "parallelism.pp_layout",
        "runtime.bitsandbytes_version",
        "runtime.transformers_version",
        "runtime.torchtitan_version",
    }
)
