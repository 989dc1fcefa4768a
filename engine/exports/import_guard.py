"""What every import promises its caller, whatever file it was handed: one short sentence
on refusal, printable one-line warnings, and a plan that is proven to save and reopen.

A file can hold anything, so the importers' own checks are backed by two rules here.
Every refusal — a bad value, a plan field the file set out of range (pydantic's text is
replaced by :func:`describe_validation_error`'s sentence), even a defect in MemPlan's own
code — becomes :class:`ImportRefused`, naming the file, at most
:data:`IMPORT_MESSAGE_CHARS` long. And an import is accepted only once the plan it
makes has been written out as a ``.memplan`` text and parsed back by the loader, equal:
an imported config kept in ``model.hf_config`` must never make a plan (or its autosave)
that the loader's own limits then refuse.
"""

from __future__ import annotations

from pydantic import ValidationError

from engine.errors import MAX_MESSAGE_CHARS, PlanFileError, clip
from engine.exports.common import Imported
from engine.fileio.strict_json import MAX_FILE_BYTES
from engine.plan import Plan, describe_validation_error
from engine.planfile import PlanFile, dumps, parse

IMPORT_MESSAGE_CHARS = 240
"""The longest refusal an import gives (a dialog shows it whole, on one or two lines)."""

INTERNAL = "an internal error"
"""Words in the refusal that wraps a defect in MemPlan rather than in the file (the fuzz
suite counts these as crashes)."""


class ImportRefused(ValueError):
    """A file (or folder) that does not become a plan; ``str()`` is one sentence naming
    it, at most :data:`IMPORT_MESSAGE_CHARS` characters."""

    def __init__(self, message: str) -> None:
        super().__init__(clip(one_line(message), IMPORT_MESSAGE_CHARS))


def one_line(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` with every unprintable character escaped (a newline, a CR, U+2028, a
    terminal escape from a key in the file cannot break or recolour the line), clipped."""
    if not text.isprintable():
        text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)
    return clip(text, limit)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        problems = describe_validation_error(exc)
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        return f"the plan it makes is invalid: {problems[0] if problems else '?'}{more}"
    if isinstance(exc, OSError):
        return f"cannot read it: {exc.strerror or exc}"
    if isinstance(exc, ValueError | LookupError) and str(exc):
        return str(exc)
    return f"cannot be read: MemPlan hit {INTERNAL} ({type(exc).__name__}); please report it"


def refusal(name: str, exc: BaseException) -> ImportRefused:
    """The one-sentence refusal of ``exc`` raised while importing the file ``name``."""
    if isinstance(exc, ImportRefused):
        return exc
    reason = _reason(exc)
    named = reason.startswith((f"{name}:", f"{name} "))
    return ImportRefused(reason if named else f"{name}: {reason}")


def prove_reopens(plan: Plan, name: str) -> None:
    """Refuse an imported plan that would not come back from its own ``.memplan`` file."""
    text = dumps(PlanFile(plan=plan, name=f"imported from {name}"))
    if len(text.encode("utf-8")) > MAX_FILE_BYTES:
        raise ImportRefused(
            f"{name}: the plan it makes would be over {MAX_FILE_BYTES // 2**20} MiB, more "
            "than a .memplan file may hold"
        )
    try:
        back = parse(text)
    except PlanFileError as exc:
        raise ImportRefused(f"{name}: the plan it makes would not reopen ({exc})") from None
    if back.plan != plan:
        raise ImportRefused(f"{name}: the plan it makes would reopen as a different plan")


MAX_NOTES = 50
"""The most resolutions, and the most warnings, an import lists (a file with a thousand
unknown keys gets the first ones and a count, not a thousand lines)."""


def _lines(notes: tuple[str, ...], what: str) -> tuple[str, ...]:
    shown = tuple(one_line(n) for n in notes[:MAX_NOTES])
    if len(notes) > MAX_NOTES:
        shown = (*shown[:-1], f"… and {len(notes) - MAX_NOTES + 1:,} more {what}")
    return shown


def tidy(got: Imported) -> Imported:
    """``got`` with every resolution and warning on one printable line, at most
    :data:`MAX_NOTES` of each."""
    return Imported(
        got.plan, _lines(got.resolutions, "resolutions"), _lines(got.warnings, "warnings")
    )
