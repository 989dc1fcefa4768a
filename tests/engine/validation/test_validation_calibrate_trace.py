"""Calibration with trace records (``kind: "trace"``): the activation band only.

The plan and stub stage are those of ``test_validation_calibrate.py`` (runtime rows
776–1824 MiB, activation rows a counted 2 GiB × band 1.0–1.25), plus an exact 1 GiB
``logits`` row (the loss's saved fp32 logits, as ``engine/ledger/activations/loss.py``
files them). A trace has no allocator and no CUDA context or NCCL, so its reserved and
external figures — here hand-added to the record, which a real trace never writes —
must not move ``runtime.allocator_reserve`` or the runtime inputs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_validation_calibrate import EST, PLAN, RECORDS, STAGE, _band
from validation_fakes import StubEstimate, StubStage

from engine.cli import main
from engine.ledger.row import make_row
from engine.planfile import PlanFile, save
from engine.units import GiB, MiB
from engine.validation.calibrate import TRACE_ACTIVATIONS, propose
from engine.validation.records import MeasuredRecord

LOGITS = make_row(
    id="hbm.loss.logits",
    label="saved fp32 logits",
    state="loss",
    location="hbm",
    kind="persistent",
    group="logits",
    low=GiB,
    high=GiB,
    formula="test",
    source="test",
)
EST_LOGITS = StubEstimate(
    PLAN.config_hash(), (StubStage(rows=(*STAGE.rows, LOGITS), peak=STAGE.peak),), world_size=8
)


def trace(**fields: Any) -> MeasuredRecord:
    """A trace record of rank 0 of 8: the tracker's categories, with the saved logits
    (½ GiB of them) under ``activations`` and the logits' gradient (``temp``) ½ GiB."""
    base = {
        "source": "trace",
        "kind": "trace",
        "config_hash": PLAN.config_hash(),
        "world_size": 8,
        "max_allocated_bytes": 8 * GiB,
        "breakdown": {"params": 4 * GiB, "activations": 3 * GiB, "temp": GiB // 2},
    }
    return MeasuredRecord.model_validate({**base, **fields})


def test_a_trace_calibrates_the_activation_band_only() -> None:
    """Traced activations + logits = 3 + ½ = 3.5 GiB, less the ledger's logits 1 GiB =
    2.5 GiB of activations as the ledger counts them; counted 2.5 GiB ÷ 1.25 = 2 GiB, so
    r = 2.5 / 2 = 1.25 → band 1.25–1.25. The reserved 10 GiB (a 25 % reserve) and the
    external 1300 MiB are ignored: no allocator or runtime proposal."""
    record = trace(max_reserved_bytes=10 * GiB, external_bytes=1300 * MiB)
    cal = propose(PLAN, [record], est=EST_LOGITS, margin=0.0)
    assert cal.changes == {"runtime.activation_band": {"low": 1.25, "high": 1.25}}
    assert TRACE_ACTIVATIONS in cal.proposals[0].evidence
    assert cal.notes == (
        "1 trace record(s) (simulated, no GPU): used for runtime.activation_band only — a "
        "trace measures no allocator reserve and no external memory (CUDA context, NCCL)",
    )


def test_gpu_records_still_calibrate_beside_a_trace() -> None:
    """GPU rank 1 alone sets the allocator band ((11 − 10)/10 = 0.10) and the runtime
    inputs (t = 0.5: context 512 MiB); the activation band spans the GPU ratio
    (17/8 GiB ÷ 2 GiB = 1.0625) and the trace's 1.25."""
    cal = propose(PLAN, [RECORDS[1], trace(max_reserved_bytes=10 * GiB)], est=EST_LOGITS, margin=0)
    assert cal.changes["runtime.allocator_reserve"] == {"low": 0.1, "high": 0.1}
    assert cal.changes["runtime.cuda_context_bytes"] == _band(512 * MiB, 512 * MiB)
    assert cal.changes["runtime.activation_band"] == {"low": 1.0625, "high": 1.25}


def test_without_a_logits_row_the_traced_activations_are_taken_as_they_are() -> None:
    """No ledger logits to subtract: 3 GiB ÷ 2 GiB counted = 1.5."""
    cal = propose(PLAN, [trace()], est=EST, margin=0.0)
    assert cal.changes == {"runtime.activation_band": {"low": 1.5, "high": 1.5}}


def test_memplan_calibrate_says_how_it_used_a_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "traced.memplan"
    save(PlanFile(plan=PLAN, measurements=(trace(config_hash=None).to_json(),)), path)
    assert main(["calibrate", str(path), "-o", str(tmp_path / "out.memplan")]) == 0
    out = capsys.readouterr().out
    assert "note: 1 trace record(s) (simulated, no GPU): used for runtime.activation_band" in out
    assert "runtime.allocator_reserve" not in out
