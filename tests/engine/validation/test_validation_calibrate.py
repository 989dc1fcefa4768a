"""Calibration proposals by hand, and that they are explicit and undoable (MiB = 2^20 B,
GiB = 2^30 B).

The plan's runtime inputs are set to round numbers: CUDA context 256–768 MiB, NCCL
512–1024 MiB per communicator, activation band 1.0–1.25. The stub stage's runtime rows
are those bands (one communicator), so the runtime range is L = 256+512 = 768 MiB …
H = 768+1024 = 1792 MiB; its activation rows are a counted 2 GiB × band = 2–2.5 GiB. The
cuBLAS workspaces are allocated bytes (PyTorch allocates them through its caching
allocator), not external memory: calibration leaves them alone.
"""

from __future__ import annotations

from typing import Any

import pytest
from validation_fakes import StubEstimate, StubStage, row

from engine.estimate import Range
from engine.plan import Plan, default_plan, with_values
from engine.units import GiB, MiB
from engine.validation.calibrate import propose
from engine.validation.identity import CALIBRATED_FIELDS, workload_hash
from engine.validation.records import MeasuredRecord


def _band(low: int, high: int) -> dict[str, int]:
    return {"low": low, "high": high}


PLAN: Plan = with_values(
    default_plan(),
    {
        "runtime.cuda_context_bytes": _band(256 * MiB, 768 * MiB),
        "runtime.nccl_bytes_per_communicator": _band(512 * MiB, 1024 * MiB),
        "runtime.activation_band": {"low": 1.0, "high": 1.25},
    },
)
STAGE = StubStage(
    rows=(
        row("hbm.weights", "weights", 4 * GiB, 4 * GiB),
        row("hbm.act", "activations", 2 * GiB, 5 * GiB // 2),
        row("hbm.runtime.cuda_context", "runtime", 256 * MiB, 768 * MiB, role="cuda_context"),
        row("hbm.runtime.nccl", "runtime", 512 * MiB, 1024 * MiB, role="nccl_buffers"),
    ),
    peak=Range(6 * GiB, 13 * GiB // 2),
)
EST = StubEstimate(PLAN.config_hash(), (STAGE,), world_size=8)


def rec(**fields: Any) -> MeasuredRecord:
    base = {"config_hash": PLAN.config_hash(), "world_size": 8}
    return MeasuredRecord.model_validate({**base, **fields})


RECORDS = [
    rec(
        rank=0,
        max_allocated_bytes=10 * GiB,
        max_reserved_bytes=23 * GiB // 2,
        external_bytes=1280 * MiB,
        breakdown={"activations": 9 * GiB // 4},
    ),
    rec(
        rank=1,
        max_allocated_bytes=10 * GiB,
        max_reserved_bytes=11 * GiB,
        external_bytes=1280 * MiB,
        breakdown={"activations": 17 * GiB // 8},
    ),
]


def test_proposals_by_hand_without_margin() -> None:
    """allocator: (11.5−10)/10 = 0.15 and (11−10)/10 = 0.10 → band 0.10–0.15.
    external: t = (1280 − 768)/(1792 − 768) = 512/1024 = 0.5 for both ranks, so each
    input moves to the middle of its band: context 256 + 0.5·512 = 512 MiB, NCCL
    512 + 0.5·512 = 768 MiB (low = high: one position); no cuBLAS proposal.
    activations: counted = 2.5 GiB / 1.25 = 2 GiB; ratios 2.25/2 = 1.125 and
    2.125/2 = 1.0625 → band 1.0625–1.125."""
    cal = propose(PLAN, RECORDS, est=EST, margin=0.0)
    assert cal.changes == {
        "runtime.allocator_reserve": {"low": 0.1, "high": 0.15},
        "runtime.cuda_context_bytes": _band(512 * MiB, 512 * MiB),
        "runtime.nccl_bytes_per_communicator": _band(768 * MiB, 768 * MiB),
        "runtime.activation_band": {"low": 1.0625, "high": 1.125},
    }
    assert cal.inverse["runtime.allocator_reserve"] == {"low": 0.11, "high": 0.36}
    assert cal.warnings == () and cal.notes == ()
    assert all(p.evidence for p in cal.proposals)


def test_margin_widens_the_measured_spread() -> None:
    """margin 5 %: allocator 0.10·0.95 = 0.095 … 0.15·1.05 = 0.1575. External:
    t_lo = (1280·0.95 − 768)/1024 = 448/1024 = 0.4375, t_hi = (1280·1.05 − 768)/1024 =
    576/1024 = 0.5625; context 256 + 0.4375·512 = 480 MiB, 256 + 0.5625·512 = 544 MiB."""
    changes = propose(PLAN, RECORDS, est=EST, margin=0.05).changes
    assert changes["runtime.allocator_reserve"] == {"low": 0.095, "high": 0.1575}
    assert changes["runtime.cuda_context_bytes"] == _band(480 * MiB, 544 * MiB)


def test_activations_from_the_residual_when_no_breakdown() -> None:
    """No breakdown: activations = allocated 7 GiB − weights 4 GiB (the other rows' mid)
    = 3 GiB; ratio 3/2 = 1.5; the evidence says how it was derived."""
    cal = propose(PLAN, [rec(max_allocated_bytes=7 * GiB)], est=EST, margin=0.0)
    assert cal.changes == {"runtime.activation_band": {"low": 1.5, "high": 1.5}}
    assert "allocated minus the other rows' mid" in cal.proposals[0].evidence


def test_calibration_is_explicit_and_undoable() -> None:
    """Applying the changes makes a different plan (the edit is real, visible in the
    hash) of the same workload; applying the inverse restores the identical hash."""
    cal = propose(PLAN, RECORDS, est=EST, margin=0.05)
    assert set(cal.changes) <= set(CALIBRATED_FIELDS)
    calibrated = with_values(PLAN, cal.changes)
    assert calibrated.config_hash() != PLAN.config_hash()
    assert workload_hash(calibrated) == workload_hash(PLAN)
    restored = with_values(calibrated, cal.inverse)
    assert restored.config_hash() == PLAN.config_hash()
    assert restored == PLAN


def test_nothing_to_calibrate_gives_no_changes() -> None:
    """A record without any measurement (CPU-only run) proposes nothing, with a note."""
    cal = propose(PLAN, [rec()], est=EST)
    assert cal.changes == {}
    assert cal.notes == ("1 record(s) hold no measurement and were skipped",)


def test_bad_margin_is_refused() -> None:
    with pytest.raises(ValueError, match="margin"):
        propose(PLAN, RECORDS, est=EST, margin=1.5)


def test_runtime_inputs_without_rows_are_left_alone() -> None:
    """A single-rank estimate without an NCCL row: the NCCL input is not edited from a
    run that had no communicator."""
    rows = tuple(r for r in STAGE.rows if r.id != "hbm.runtime.nccl")
    est = StubEstimate(PLAN.config_hash(), (StubStage(rows=rows, peak=STAGE.peak),), world_size=8)
    changes = propose(PLAN, RECORDS, est=est, margin=0.0).changes
    assert "runtime.nccl_bytes_per_communicator" not in changes
    assert "runtime.cuda_context_bytes" in changes
