"""Trace records in the plan file, and how validate-run shows them (no torch needed:
the trace result here is built by hand, as the runner would build it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main
from engine.plan import Plan
from engine.planfile import PlanFile, load, save
from engine.trace.record import trace_record
from engine.trace.result import PhaseRecord, Snapshot, TraceResult, TraceSetup
from engine.validation.records import MeasuredRecord, parse_record
from engine.validation.store import attach, records_of

PLAN = Plan()


def _phase(step: int, phase: str, peak: dict[str, int], end: dict[str, int]) -> PhaseRecord:
    return PhaseRecord(step, 0, phase, Snapshot(peak), Snapshot(end), f"{phase} somewhere")


def fake_result(peak_bytes: int = 47_000_000_000) -> TraceResult:
    """Two steps; the second's backward peaks at ``peak_bytes``."""
    states = {"params": 4 * 10**9, "optimizer_state": 8 * 10**9}
    phases = []
    for step in (0, 1):
        phases += [
            _phase(step, "forward", {**states, "activations": 30 * 10**9}, states),
            _phase(step, "backward", {**states, "temp": peak_bytes - 12 * 10**9}, states),
            _phase(step, "optimizer", states, states),
            _phase(step, "zero_grad", states, states),
        ]
    setup = TraceSetup(
        family="llama", model_type="llama", world_size=8, rank=0, mesh=(8,),
        strategy="FSDP2 × 8", tracker="FSDPMemTracker", steps=2, micro_batches=1,
        attention="sdpa", param_dtype="fp32", compute_dtype="bf16", recompute="none",
        optimizer="adamw (foreach)", n_params=1, n_trainable=1, plan_params=1,
        rounding_bytes=512,
    )  # fmt: skip
    versions = {"torch": "2.13.0+cpu", "transformers": "5.24.0", "peft": "0.21.2"}
    return TraceResult(setup, tuple(phases), {"params": 4 * 10**9}, versions, 12.5)


def test_result_reports_the_steady_step() -> None:
    r = fake_result()
    assert r.peak_bytes == 47_000_000_000 and r.peak_phase.step == 1
    assert r.peak_phase.phase == "backward" and r.saved_activations == 0


def test_trace_record_round_trips_as_a_simulated_measurement() -> None:
    record = trace_record(PLAN, fake_result(), "p")
    doc = record.to_json()
    assert doc["kind"] == "trace" and doc["source"] == "trace"
    assert doc["config_hash"] == PLAN.config_hash()
    assert doc["versions"]["torch"] == "2.13.0+cpu" and doc["world_size"] == 8
    assert doc["window"]["seconds"] == 12.5 and doc["max_allocated_bytes"] == 47 * 10**9
    assert doc["extra"]["phases"][0]["phase"] == "forward"
    back = parse_record(json.loads(json.dumps(doc)))
    assert back == record and back.simulated


def test_records_without_kind_are_gpu_runs_and_stay_without_it() -> None:
    old = {"format": "memplan-measurement", "record_version": 1, "max_allocated_bytes": 5}
    record = parse_record(old)
    assert record.kind == "gpu" and not record.simulated
    assert "kind" not in record.to_json()


def test_trace_kind_needs_the_trace_source() -> None:
    with pytest.raises(ValueError, match="trace"):
        MeasuredRecord(kind="trace", source="probe")


def test_validate_run_compares_a_stored_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "p.memplan"
    pf, added = attach(PlanFile(plan=PLAN, name="p"), [trace_record(PLAN, fake_result(), "p")])
    save(pf, path)
    assert added == 1 and records_of(load(path))[0].simulated
    assert main(["validate-run", str(path)]) == 0
    out = capsys.readouterr().out
    assert "1 record(s) (1 simulated (trace))" in out
    assert "simulated (trace), torch 2.13.0+cpu" in out and "traced" in out
    assert main(["validate-run", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ranks"][0]["kind"] == "trace" and doc["ranks"][0]["simulated"] is True
