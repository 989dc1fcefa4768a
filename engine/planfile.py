"""Read and write ``.memplan`` files: versioned, hashed, atomically saved.

A file is UTF-8 JSON::

    {"format": "memplan", "schema_version": 3, "app_version": "0.1.0",
     "created": "...", "modified": "...", "name": "...", "notes": "...",
     "config_hash": "<sha256 of the canonical plan>", "plan": {...},
     "measurements": []}

Older schema versions are upgraded through a chain of migrations; a newer version is
refused without touching the file. Reading goes through ``fileio.strict_json``, so a
hostile file (huge, deeply nested, duplicate keys, half a character) is refused with one
sentence naming the field; saving goes through ``fileio.atomic``: a crash never damages
the previous file, and the file's mode and symlink survive a save.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from engine import FORMULA_VERSION, __version__
from engine.errors import PlanFileError, field_path, quote
from engine.fileio import strict_json
from engine.fileio.atomic import write_atomic
from engine.plan import Plan, canonical_hash, describe_validation_error
from engine.plan_migrations import fill_late_sections, migrate_plan_1_to_2, migrate_plan_2_to_3

__all__ = ["PlanFile", "PlanFileError", "dumps", "load", "parse", "save"]

FORMAT_NAME = "memplan"
SCHEMA_VERSION = 3


@dataclass(frozen=True)
class PlanFile:
    """A plan with its metadata, as stored on disk."""

    plan: Plan
    name: str = "Untitled plan"
    notes: str = ""
    created: str = ""
    modified: str = ""
    app_version: str = __version__
    formula_version: int | None = None  # the engine's formulas it was saved under
    measurements: tuple[dict[str, Any], ...] = ()
    upgraded_from: int | None = None  # the schema version the file had, when migrated
    stored_hash: str | None = None  # the hash written in the file (None if absent)
    extra_messages: tuple[str, ...] = field(default=())

    @property
    def config_hash(self) -> str:
        return self.plan.config_hash()


def _now() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat()


def _migrate_0_to_1(doc: dict[str, Any]) -> dict[str, Any]:
    """Schema 0 (pre-release drafts) kept the plan under "inputs" and the name under
    "title", and had no "format" marker."""
    out = dict(doc)
    if "inputs" in out:
        out["plan"] = out.pop("inputs")
    if "title" in out:
        out["name"] = out.pop("title")
    out["format"] = FORMAT_NAME
    out["schema_version"] = 1
    return out


def _migrate_1_to_2(doc: dict[str, Any]) -> dict[str, Any]:
    """Schema 2 made the training stack an input and folds EP over TP × CP × DP; the
    plan keeps schema 1's meaning (:func:`engine.plan_migrations.migrate_plan_1_to_2`)."""
    out = dict(doc)
    if isinstance(out.get("plan"), dict):
        out["plan"] = migrate_plan_1_to_2(out["plan"])
    out["schema_version"] = 2
    return out


def _migrate_2_to_3(doc: dict[str, Any]) -> dict[str, Any]:
    """Schema 3 works the allocator reserve out from the allocator's rules and keeps no
    default headroom; the plan keeps schema 2's meaning
    (:func:`engine.plan_migrations.migrate_plan_2_to_3`)."""
    out = dict(doc)
    if isinstance(out.get("plan"), dict):
        out["plan"] = migrate_plan_2_to_3(out["plan"])
    out["schema_version"] = 3
    return out


MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {
    0: _migrate_0_to_1,
    1: _migrate_1_to_2,
    2: _migrate_2_to_3,
}
"""MIGRATIONS[n] turns a schema-n document into a schema-(n+1) document."""


def migrate(doc: dict[str, Any]) -> tuple[dict[str, Any], int | None]:
    """Upgrade a document to the current schema; returns it and the version it had."""
    version = doc.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise PlanFileError(f"schema_version must be a non-negative integer, got {quote(version)}")
    if version > SCHEMA_VERSION:
        raise PlanFileError(
            f"this file has schema_version {version}, newer than this MemPlan understands "
            f"({SCHEMA_VERSION}); open it with a newer MemPlan — the file was not changed"
        )
    original = version
    while version < SCHEMA_VERSION:
        doc = MIGRATIONS[version](doc)
        version += 1
    return doc, (original if original != SCHEMA_VERSION else None)


_TOP_KEYS = {
    "format",
    "schema_version",
    "app_version",
    "formula_version",
    "created",
    "modified",
    "name",
    "notes",
    "config_hash",
    "plan",
    "measurements",
}


def parse(text: str) -> PlanFile:
    """Parse file text into a PlanFile, or raise PlanFileError naming the problem."""
    doc = strict_json.loads(text.removeprefix(strict_json.BOM))
    if not isinstance(doc, dict):
        raise PlanFileError("not a MemPlan file: the top level must be a JSON object")
    if "schema_version" not in doc:
        raise PlanFileError('not a MemPlan file: it has no "schema_version"')
    if doc.get("schema_version") != 0 and doc.get("format") != FORMAT_NAME:
        raise PlanFileError(f'not a MemPlan file: "format" must be "{FORMAT_NAME}"')
    doc, upgraded_from = migrate(doc)
    unknown = sorted(set(doc) - _TOP_KEYS)
    if unknown:
        where = field_path((unknown[0],))
        raise PlanFileError(f"{where}: unknown field at the top level of the file")
    if "plan" not in doc:
        raise PlanFileError("plan: required section is missing")
    if not isinstance(doc["plan"], dict):
        raise PlanFileError("plan: must be a JSON object")
    for key in ("name", "notes"):
        if key in doc and not isinstance(doc[key], str):
            raise PlanFileError(f"{key}: must be a string")
    measurements = doc.get("measurements", [])
    if not isinstance(measurements, list) or not all(isinstance(m, dict) for m in measurements):
        raise PlanFileError("measurements: must be a list of JSON objects")
    fill_late_sections(doc["plan"])
    missing = [s for s in Plan.model_fields if s not in doc["plan"]]
    if missing:
        raise PlanFileError(f"plan.{missing[0]}: required section is missing")
    try:
        plan = Plan.model_validate(doc["plan"])
    except ValidationError as exc:
        problems = describe_validation_error(exc, "plan")
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise PlanFileError(problems[0] + more, problems) from exc
    stored = doc.get("config_hash")
    messages = []
    if (
        isinstance(stored, str)
        and upgraded_from is None
        and stored not in (plan.config_hash(), canonical_hash(doc["plan"]))
    ):
        messages.append(
            "the stored config_hash does not match the plan's content (edited by hand?); "
            "it will be rewritten on save"
        )
    if upgraded_from is not None:
        messages.append(
            f"this plan was saved with schema version {upgraded_from} and was upgraded to "
            f"version {SCHEMA_VERSION}; saving writes the new version"
        )
    return PlanFile(
        plan=plan,
        name=str(doc.get("name", "Untitled plan")),
        notes=str(doc.get("notes", "")),
        created=str(doc.get("created", "")),
        modified=str(doc.get("modified", "")),
        app_version=str(doc.get("app_version", "")),
        formula_version=fv if isinstance(fv := doc.get("formula_version"), int) else None,
        measurements=tuple(measurements),
        upgraded_from=upgraded_from,
        stored_hash=stored if isinstance(stored, str) else None,
        extra_messages=tuple(messages),
    )


def _read(p: Path) -> bytes:
    """The file's bytes, refusing what is not a plan-sized regular file before reading it
    (a FIFO would block, a device or a huge file would fill memory)."""
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except OSError as exc:
        raise PlanFileError(f"cannot read {p}: {exc.strerror or exc}") from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise PlanFileError(f"not a MemPlan file: {p.name} is not a regular file")
        with os.fdopen(os.dup(fd), "rb") as fh:
            return fh.read(strict_json.MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise PlanFileError(f"cannot read {p}: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)


def load(path: str | os.PathLike[str]) -> PlanFile:
    """Read a .memplan file. Raises PlanFileError (also for unreadable files)."""
    p = Path(path)
    return parse(strict_json.decode(_read(p), p.name))


def to_document(pf: PlanFile) -> dict[str, Any]:
    """The JSON document for a PlanFile, with a fresh hash and modified time."""
    now = _now()
    return {
        "format": FORMAT_NAME,
        "schema_version": SCHEMA_VERSION,
        "app_version": __version__,
        "formula_version": FORMULA_VERSION,
        "created": pf.created or now,
        "modified": now,
        "name": pf.name,
        "notes": pf.notes,
        "config_hash": pf.plan.config_hash(),
        "plan": pf.plan.model_dump(mode="json"),
        "measurements": list(pf.measurements),
    }


def dumps(pf: PlanFile) -> str:
    """The file's text. A lone surrogate (half a character, which no file holds but a
    pasted name can) is written as U+FFFD, so saving never fails and the file reopens."""
    text = json.dumps(to_document(pf), indent=2, ensure_ascii=False) + "\n"
    return strict_json.without_lone_surrogates(text)


def save(pf: PlanFile, path: str | os.PathLike[str]) -> Path:
    """Write atomically (see ``fileio.atomic``); returns the file written, which is a
    symlink's target when ``path`` is a link. Raises SaveError (an OSError) in words."""
    return write_atomic(dumps(pf).encode("utf-8"), path)
