"""Measured-run records: the schema, parsing from files, and the reference-case shape.

A record is what one rank measured over a steady-state window of training steps. Two
shapes are read:

- the probe's JSON (``"format": "memplan-measurement"``, written by
  ``resources/probe/memplan_probe.py``), one object per rank;
- a measured reference case (``shared/reference/measured/cases.jsonl``): a
  ``peak_bytes`` with a ``peak_breakdown`` by tracker category. It is an allocated peak
  only (no reserved or device figures); its categories are mapped onto the ledger's row
  groups by :data:`~engine.validation.categories.REFERENCE_CATEGORY_GROUP` (see the table
  in ``reconcile.py``).

Records are frozen pydantic models with ``extra="forbid"``, so a typo in a hand-edited
record is reported, not ignored; they are stored as plain JSON in the ``.memplan`` file's
``measurements`` list.

A record's ``kind`` says what measured it: ``"gpu"`` (a real run: the probe, a hand
entry, a reference case) or ``"trace"`` (``memplan trace``: PyTorch's trackers on fake
tensors, a *simulated* measurement of the allocated peak only). Records written before
``kind`` existed have none and are GPU runs; a GPU record is stored without the key, so
its JSON is what older versions wrote and re-importing it is still recognised as a
duplicate.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from engine.plan import describe_validation_error
from engine.validation.categories import REFERENCE_CATEGORY_GROUP

RECORD_FORMAT: Final = "memplan-measurement"
RecordKind = Literal["gpu", "trace"]
RECORD_VERSION: Final = 1

Bytes = int

SPLIT_OF: dict[str, tuple[str, ...]] = {"optimizer": ("optimizer_state", "optimizer_temp")}
"""An aggregate and the parts that re-count it: when a part is present the aggregate is
skipped (``optimizer`` = ``optimizer_state`` + ``optimizer_temp``)."""


class RecordError(ValueError):
    """A record that cannot be read; ``str()`` names the file and the field."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class DeviceInfo(_Frozen):
    index: int | None = None
    name: str | None = Field(default=None, max_length=200)
    total_bytes: Bytes | None = Field(default=None, ge=0)


class Window(_Frozen):
    """The measured steps: after ``warmup_steps`` skipped, ``window_steps`` measured."""

    warmup_steps: int = Field(default=0, ge=0)
    window_steps: int = Field(default=1, ge=1)
    steps_seen: int = Field(default=0, ge=0)
    seconds: float | None = Field(default=None, ge=0)


class MeasuredRecord(_Frozen):
    """One rank's measurement of one run (all byte figures are integers).

    ``max_allocated_bytes`` is ``torch.cuda.max_memory_allocated`` (tensors);
    ``max_reserved_bytes`` the caching allocator's reserve; ``device_used_bytes`` total −
    free from ``cudaMemGetInfo``; ``external_bytes`` the part of used outside PyTorch's
    allocator (context, NCCL, cuBLAS). ``breakdown`` is by ledger row group.
    """

    format: Literal["memplan-measurement"] = RECORD_FORMAT
    record_version: Literal[1] = RECORD_VERSION
    source: Literal["probe", "reference-case", "manual", "trace"] = "probe"
    kind: RecordKind = "gpu"
    label: str = Field(default="", max_length=500)
    config_hash: str | None = Field(default=None, max_length=128)
    workload_hash: str | None = Field(default=None, max_length=128)
    plan_name: str | None = Field(default=None, max_length=500)
    created: str = Field(default="", max_length=64)
    rank: int = Field(default=0, ge=0)
    local_rank: int = Field(default=0, ge=0)
    world_size: int = Field(default=1, ge=1)
    local_world_size: int = Field(default=1, ge=1)
    hostname: str = Field(default="", max_length=256)
    pp_stage: int | None = Field(default=None, ge=0)
    device: DeviceInfo | None = None
    window: Window = Field(default_factory=Window)
    max_allocated_bytes: Bytes | None = Field(default=None, ge=0)
    max_reserved_bytes: Bytes | None = Field(default=None, ge=0)
    device_total_bytes: Bytes | None = Field(default=None, ge=0)
    device_used_bytes: Bytes | None = Field(default=None, ge=0)
    external_bytes: int | None = None
    versions: dict[str, str | None] = Field(default_factory=dict)
    memory_stats: dict[str, int] | None = None
    breakdown: dict[str, Bytes] | None = None
    extra: dict[str, Any] = Field(default_factory=dict)
    notes: tuple[str, ...] = ()
    alloc_events: list[list[Any]] | None = None
    """A trace's allocation/free sequence, one ``[kind, nbytes, block, stream, phase]``
    array per event (``engine/trace/alloc_log.py``); None for a GPU run."""

    @model_validator(mode="after")
    def _consistent(self) -> MeasuredRecord:
        if self.rank >= self.world_size:
            raise ValueError(f"rank {self.rank} is not below world_size {self.world_size}")
        if self.breakdown is not None and any(v < 0 for v in self.breakdown.values()):
            raise ValueError("breakdown: byte counts must be non-negative")
        if (self.source == "trace") != (self.kind == "trace"):
            raise ValueError('kind "trace" goes with source "trace" (and only with it)')
        return self

    @property
    def simulated(self) -> bool:
        """A trace (fake tensors, no GPU), not a measurement on a device."""
        return self.kind == "trace"

    @property
    def measured(self) -> bool:
        """Whether the record holds an allocated peak at all (a CPU-only run does not)."""
        return self.max_allocated_bytes is not None

    @property
    def title(self) -> str:
        """A short name for tables: label (or host) and rank."""
        who = self.label or self.hostname or self.source
        return f"{who} rank {self.rank}"

    def to_json(self) -> dict[str, Any]:
        """The plain JSON object stored in a ``.memplan`` file (a GPU record without
        ``kind``, as records were stored before traces existed)."""
        doc = self.model_dump(mode="json")
        if self.kind == "gpu":
            doc.pop("kind")
        if self.alloc_events is None:
            doc.pop("alloc_events")
        return doc


def map_reference_breakdown(raw: dict[str, Any], where: str = "peak_breakdown") -> dict[str, int]:
    """A reference case's tracker categories summed into ledger row groups.

    ``total`` and an aggregate whose parts are present (:data:`SPLIT_OF`) are skipped,
    because they re-count other keys; ``total``, when present, must equal the sum of
    the rest. An unknown category keeps its own name, so nothing is silently dropped.
    """
    skip = {"total"} | {agg for agg, parts in SPLIT_OF.items() if any(p in raw for p in parts)}
    out: dict[str, int] = {}
    for key, value in raw.items():
        if key in skip:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise RecordError(f"{where}.{key}: must be a non-negative integer of bytes")
        group = REFERENCE_CATEGORY_GROUP.get(key, key)
        out[group] = out.get(group, 0) + value
    total = raw.get("total")
    if isinstance(total, int) and total != sum(out.values()):
        raise RecordError(
            f"{where}.total is {total:,} B but its categories sum to {sum(out.values()):,} B"
        )
    return out


def _from_reference_case(doc: dict[str, Any], where: str) -> MeasuredRecord:
    peak = doc.get("peak_bytes")
    if not isinstance(peak, int) or peak < 0:
        raise RecordError(f"{where}: peak_bytes must be a non-negative integer")
    breakdown_raw = doc.get("peak_breakdown")
    breakdown = (
        map_reference_breakdown(breakdown_raw, f"{where}: peak_breakdown")
        if isinstance(breakdown_raw, dict)
        else None
    )
    inputs = doc.get("inputs") if isinstance(doc.get("inputs"), dict) else {}
    world = inputs.get("world_size", 1) if isinstance(inputs, dict) else 1
    raw_versions = doc.get("versions")
    versions = raw_versions if isinstance(raw_versions, dict) else {}
    return MeasuredRecord(
        source="reference-case",
        label=str(doc.get("name", "")),
        world_size=world if isinstance(world, int) and world >= 1 else 1,
        max_allocated_bytes=peak,
        versions={str(k): (None if v is None else str(v)) for k, v in versions.items()},
        breakdown=breakdown,
        extra={"peak_phase": doc.get("peak_phase")},
        notes=(
            "reference case: the allocated peak only (no allocator reserve, CUDA context "
            "or NCCL), measured by PyTorch's memory tracker under fake tensors",
        ),
    )


def parse_record(doc: Any, where: str = "record") -> MeasuredRecord:
    """A record from one JSON object of either shape; RecordError names the field."""
    if not isinstance(doc, dict):
        raise RecordError(f"{where}: a record must be a JSON object")
    if doc.get("format") == RECORD_FORMAT:
        try:
            return MeasuredRecord.model_validate(doc)
        except ValidationError as exc:
            problems = describe_validation_error(exc)
            raise RecordError(f"{where}: " + "; ".join(problems)) from exc
    if "peak_bytes" in doc:
        return _from_reference_case(doc, where)
    raise RecordError(
        f'{where}: not a measurement record (no "format": "{RECORD_FORMAT}" and no "peak_bytes")'
    )


def _docs_in(path: Path) -> list[tuple[Any, str]]:
    """The JSON objects in one file: an object, a list of them, or JSON lines."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RecordError(f"cannot read {path}: {exc}") from exc
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        out = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                out.append((json.loads(line), f"{path}:{number}"))
            except json.JSONDecodeError as exc:
                raise RecordError(f"{path}:{number}: not valid JSON ({exc.msg})") from exc
        return out
    if isinstance(doc, list):
        return [(item, f"{path}[{i}]") for i, item in enumerate(doc)]
    return [(doc, str(path))]


def load_records(path: str | Path) -> list[MeasuredRecord]:
    """Every record in a file (object, list or JSON lines) or a folder's ``*.json``."""
    p = Path(path)
    files = sorted(p.glob("*.json")) + sorted(p.glob("*.jsonl")) if p.is_dir() else [p]
    if p.is_dir() and not files:
        raise RecordError(f"{p}: the folder holds no .json records")
    return [parse_record(doc, where) for f in files for doc, where in _docs_in(f)]


def stored_records(measurements: tuple[dict[str, Any], ...]) -> list[MeasuredRecord]:
    """The records kept in a PlanFile's ``measurements`` (RecordError names the index)."""
    return [parse_record(m, f"measurements[{i}]") for i, m in enumerate(measurements)]
