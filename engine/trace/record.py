"""A trace as a measured record (``kind: "trace"``), to keep in the plan file.

It carries what ``validate-run`` compares — the allocated peak and its breakdown by
category — plus what a reader needs to trust it: the config hash it was traced for,
the library versions, world size and rank, wall time, the phases and model states.
Reserved, external and device memory are not measured by a trace (there is no
allocator, context or NCCL), so they stay empty and are reported as *not measured*; the
allocator replay of the trace's events (``reserved.py``) is kept beside them in
``extra["replay"]`` as a simulated reserved figure (:func:`stored_replay`).
:func:`result_from_record` reads the trace back from a stored record, so the window and
the report compare it with the ledger per group and phase without running it again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime

from engine.plan import Plan
from engine.trace.alloc_log import events_from_json, events_to_json
from engine.trace.reserved import TraceReplay, replay_trace
from engine.trace.result import TraceResult
from engine.validation.identity import workload_hash
from engine.validation.records import DeviceInfo, MeasuredRecord, RecordError, Window

TRACE_NOTE = (
    "simulated measurement: PyTorch's memory trackers on fake tensors (no GPU); the "
    "allocated peak, and reserved only as the allocator replay simulates it — no CUDA "
    "context or NCCL buffers"
)
OLD_TRACE_NOTES: tuple[str, ...] = (
    "simulated measurement: PyTorch's memory trackers on fake tensors (no GPU); the "
    "allocated peak only — no allocator reserve, CUDA context or NCCL buffers",
)
"""The note records made before the replay carried (read back as not a trace note)."""


def trace_record(plan: Plan, result: TraceResult, plan_name: str = "") -> MeasuredRecord:
    """The record of one trace of ``plan``."""
    s = result.setup
    peak = result.peak_phase
    breakdown = {k: v for k, v in peak.peak.by_category.items() if v}
    return MeasuredRecord(
        source="trace",
        kind="trace",
        label=f"trace {s.strategy}",
        config_hash=plan.config_hash(),
        workload_hash=workload_hash(plan),
        plan_name=plan_name or plan.model.name,
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        rank=s.rank,
        world_size=s.world_size,
        device=DeviceInfo(name=f"fake cpu (FakeTensorMode), {s.tracker}"),
        window=Window(
            warmup_steps=s.steps - 1,
            window_steps=1,
            steps_seen=s.steps,
            seconds=round(result.wall_seconds, 3),
        ),
        max_allocated_bytes=result.peak_bytes,
        versions=dict(result.versions),
        breakdown=breakdown,
        extra={
            "peak_phase": peak.phase,
            "peak_moment": peak.moment,
            "saved_activations_after_forward": result.saved_activations,
            "model_states": dict(result.model_states),
            "phases": [p.to_json() for p in result.phases],
            "setup": result.to_json()["setup"],
            "wall_seconds": round(result.wall_seconds, 3),
            "replay": replay_trace(plan, result.alloc_events).to_json(),
        },
        notes=(TRACE_NOTE, *result.notes),
        alloc_events=events_to_json(result.alloc_events),
    )


def result_from_record(record: MeasuredRecord) -> TraceResult:
    """The trace a record of :func:`trace_record` holds; ``RecordError`` when it is not a
    trace record or its ``extra`` has been damaged."""
    if not record.simulated:
        raise RecordError(f"{record.title}: not a trace record")
    extra = record.extra
    doc = {
        "setup": extra.get("setup"),
        "phases": extra.get("phases"),
        "model_states": extra.get("model_states"),
        "wall_seconds": extra.get("wall_seconds", record.window.seconds),
        "versions": {k: v for k, v in record.versions.items() if v is not None},
        "notes": [n for n in record.notes if n != TRACE_NOTE and n not in OLD_TRACE_NOTES],
    }
    try:
        events = events_from_json(record.alloc_events or [])
        return dataclasses.replace(TraceResult.from_json(doc), alloc_events=events)
    except ValueError as exc:
        raise RecordError(f"{record.title}: the stored trace cannot be read back ({exc})") from exc


def stored_replay(record: MeasuredRecord) -> TraceReplay | None:
    """The allocator replay a trace record keeps (None: a record from before the replay,
    or a damaged one)."""
    try:
        return TraceReplay.from_json(record.extra.get("replay"))
    except ValueError:
        return None


def latest_trace(records: Sequence[MeasuredRecord], config_hash: str) -> MeasuredRecord | None:
    """The trace to show beside a plan: the newest traced for its config hash, else the
    newest trace of any (shown with a warning that the plan changed since)."""
    traces = [(r.created, i, r) for i, r in enumerate(records) if r.simulated]
    same = [t for t in traces if t[2].config_hash == config_hash]
    pool = same or traces
    return max(pool, key=lambda t: (t[0], t[1]))[2] if pool else None
