"""A plan file's identity across saves: its name and its created / modified times.

A plan started with File → New has no ``created`` time until its first save; the file
writer stamps one then (``engine.planfile.to_document``), and the document must keep
that one — it used to keep "" and so every later save stamped a new one. Save As of a
never-named plan names it after the file, as ``memplan new -o FILE`` does.
"""

from __future__ import annotations

from pathlib import Path

from engine import planfile

UNTITLED = "Untitled plan"
"""The name of a plan never named (the built-in default, File → New)."""


def name_after_file(name: str, target: Path) -> str:
    """The plan's name once saved as ``target``: kept when the user named it."""
    return target.stem if name.strip() in ("", UNTITLED) else name


def write(pf: planfile.PlanFile, target: Path) -> tuple[str, str]:
    """Save ``pf`` as ``target`` and return the (created, modified) times it was written
    with, read back from the file (the writer stamps them)."""
    written = planfile.save(pf, target)
    try:
        back = planfile.load(written)
    except planfile.PlanFileError:  # written but unreadable: keep what we know
        return pf.created, pf.modified
    return back.created, back.modified
