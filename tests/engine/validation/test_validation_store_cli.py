"""Records kept in the .memplan file, and the probe / validate-run / calibrate commands.

The real estimate of the default plan is used; on this engine version it may lack
runtime rows, so these tests only compare figures every version has (allocated), and
calibrate only ``runtime.allocator_reserve`` (from reserved and allocated), derived
below.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main
from engine.plan import default_plan, get_value, with_value
from engine.planfile import PlanFile, load, save
from engine.units import GiB
from engine.validation.identity import workload_hash
from engine.validation.records import MeasuredRecord
from engine.validation.store import attach, records_of

PLAN = with_value(default_plan(), "runtime.reserve_model", "fraction")
"""The default plan with the reserve as a share of allocated, which ``calibrate`` then
narrows from reserved ÷ allocated (the allocator model's fragmentation is calibrated in
tests/engine/allocator/test_calibration.py)."""


def rec(rank: int, **fields: object) -> MeasuredRecord:
    base = {
        "config_hash": PLAN.config_hash(),
        "workload_hash": workload_hash(PLAN),
        "world_size": 8,
        "rank": rank,
        "label": "run",
        "max_allocated_bytes": 20 * GiB,
        "max_reserved_bytes": 22 * GiB,
    }
    return MeasuredRecord.model_validate({**base, **fields})


@pytest.fixture
def plan_path(tmp_path: Path) -> Path:
    path = tmp_path / "p.memplan"
    save(PlanFile(plan=PLAN, name="p"), path)
    return path


def _write_records(path: Path, records: list[MeasuredRecord]) -> Path:
    path.write_text(json.dumps([r.to_json() for r in records]), "utf-8")
    return path


def test_records_survive_save_and_load(tmp_path: Path) -> None:
    records = [rec(0), rec(1, breakdown={"weights": GiB}, versions={"torch": "2.13"})]
    pf, added = attach(PlanFile(plan=PLAN), records)
    assert added == 2
    again, added_again = attach(pf, records)  # re-importing adds nothing
    assert added_again == 0 and again.measurements == pf.measurements
    save(pf, tmp_path / "r.memplan")
    loaded = load(tmp_path / "r.memplan")
    assert records_of(loaded) == records
    assert loaded.plan == PLAN


def test_probe_command_writes_the_snippet(
    plan_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "memplan_probe.py"
    assert main(["probe", str(plan_path), "-o", str(out)]) == 0
    assert f"PLAN_CONFIG_HASH = {PLAN.config_hash()!r}" in out.read_text("utf-8")
    assert main(["probe", str(plan_path), "-o", str(out)]) == 1
    assert "exists" in capsys.readouterr().err


def test_validate_run_stores_records_and_shows_verdicts(
    plan_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = _write_records(tmp_path / "r.json", [rec(0), rec(1)])
    assert main(["validate-run", str(plan_path), str(records)]) == 0
    out = capsys.readouterr()
    assert "run rank 0 (stage 0):" in out.out and "run rank 1 (stage 0):" in out.out
    assert "WARNING" not in out.out
    assert "stored 2 new record(s)" in out.err
    assert len(load(plan_path).measurements) == 2
    assert main(["validate-run", str(plan_path), str(records)]) == 0
    assert len(load(plan_path).measurements) == 2  # no duplicates
    capsys.readouterr()
    assert main(["validate-run", str(plan_path), "--json"]) == 0  # the stored records
    doc = json.loads(capsys.readouterr().out)
    assert [r["rank"] for r in doc["ranks"]] == [0, 1]
    assert doc["ranks"][0]["figures"][0]["measured_bytes"] == 20 * GiB


def test_validate_run_warns_on_another_plans_record(
    plan_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = _write_records(
        tmp_path / "o.json", [rec(0, config_hash="c" * 64, workload_hash="d" * 64)]
    )
    before = plan_path.read_bytes()
    assert main(["validate-run", str(plan_path), str(other), "--no-save"]) == 0
    out = capsys.readouterr().out
    assert "WARNING: run rank 0: measured for config cccccccccccc" in out
    assert plan_path.read_bytes() == before  # --no-save leaves the file alone


def test_calibrate_prints_before_after_and_writes_a_new_file(
    plan_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Reserved 22 GiB over allocated 20 GiB on both ranks: f = 2/20 = 0.1; widened
    5 %: 0.095 … 0.105. The default band is 0.11–0.36."""
    records = _write_records(tmp_path / "r.json", [rec(0), rec(1)])
    out = tmp_path / "cal.memplan"
    before = plan_path.read_bytes()
    assert main(["calibrate", str(plan_path), str(records), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert (
        'runtime.allocator_reserve: {"high": 0.36, "low": 0.11} → {"high": 0.105, "low": 0.095}'
    ) in text
    assert plan_path.read_bytes() == before
    calibrated = load(out)
    assert get_value(calibrated.plan, "runtime.allocator_reserve") == {"low": 0.095, "high": 0.105}
    assert len(calibrated.measurements) == 2
    # the records still match the calibrated plan's workload: a note, no warning
    assert main(["validate-run", str(out), "--no-save"]) == 0
    shown = capsys.readouterr().out
    assert "WARNING" not in shown and "calibrated runtime ranges" in shown
    assert main(["calibrate", str(plan_path), str(records), "-o", str(out)]) == 1
    assert "exists" in capsys.readouterr().err


def test_bad_record_file_is_a_clean_error(
    plan_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "memplan-measurement", "rank": -1}', "utf-8")
    assert main(["validate-run", str(plan_path), str(bad)]) == 1
    assert "rank" in capsys.readouterr().err
