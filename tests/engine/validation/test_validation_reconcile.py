"""Reconciliation arithmetic, by hand, against a stub estimate (GiB = 2^30 B).

The stub stage (peak phase: backward) has these HBM rows:

    weights 4, gradients 4, optimizer 8 (exact); activations 10–12 (forward, backward);
    temporaries 1–2 (backward); an optimizer-step temporary 1 (optimizer phase only);
    runtime: CUDA context 0.5–1, NCCL 1–1.5; allocator reserve 2–4; and a host row.

    allocated peak (backward) = 4+4+8+10+1 = 27  …  4+4+8+12+2 = 30   (mid 28.5)
    reserved peak  = allocated + reserve   = 29 … 34                   (mid 31.5)
    runtime (external) = 0.5+1 = 1.5 … 1+1.5 = 2.5                     (mid 2)
    device peak    = reserved + runtime    = 30.5 … 36.5               (mid 33.5)
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from validation_fakes import StubEstimate, StubStage, row

from engine.estimate import Range, estimate
from engine.units import GiB
from engine.validation.reconcile import reconcile, reconcile_record
from engine.validation.records import (
    MeasuredRecord,
    RecordError,
    load_records,
    map_reference_breakdown,
    parse_record,
)
from engine.validation.report import reconciliation_json, render

HASH = "a" * 64
MEASURED = Path(__file__).resolve().parents[3].parent / "shared" / "reference" / "measured"

ROWS = (
    row("hbm.weights", "weights", 4 * GiB, 4 * GiB),
    row("hbm.grads", "gradients", 4 * GiB, 4 * GiB),
    row("hbm.optimizer", "optimizer", 8 * GiB, 8 * GiB),
    row("hbm.act", "activations", 10 * GiB, 12 * GiB, ("forward", "backward")),
    row("hbm.temp", "temporaries", 1 * GiB, 2 * GiB, ("backward",)),
    row("hbm.opt_temp", "optimizer", 1 * GiB, 1 * GiB, ("optimizer",)),
    row("hbm.runtime.cuda_context", "runtime", GiB // 2, 1 * GiB),
    row("hbm.runtime.nccl", "runtime", 1 * GiB, 3 * GiB // 2),
    row("hbm.runtime.allocator_reserve", "allocator", 2 * GiB, 4 * GiB),
    row("host.pinned", "weights", 100 * GiB, 100 * GiB, location="host"),
)
STAGE = StubStage(
    rows=ROWS,
    peak=Range(27 * GiB, 30 * GiB),
    reserved_peak=Range(29 * GiB, 34 * GiB),
    device_peak=Range(61 * GiB // 2, 73 * GiB // 2),
)
EST = StubEstimate(HASH, (STAGE,), world_size=4)


def rec(**fields: object) -> MeasuredRecord:
    base: dict[str, object] = {"config_hash": HASH, "world_size": 4, "label": "run"}
    return MeasuredRecord.model_validate({**base, **fields})


def test_figures_verdicts_and_errors_by_hand() -> None:
    """rank 0: allocated 28.5 = mid → inside, error 0; reserved 33 → inside, error
    33 − 31.5 = +1.5 GiB = +4.545 % of 33; external 3 > 2.5 → above, error 3 − 2 = +1 GiB
    (+33.3 %); device 36 ≤ 36.5 → inside. rank 1: 31 > 30 → above, error 31 − 28.5 =
    +2.5 GiB = +8.065 % of 31. rank 2: 26 < 27 → below, error −2.5 GiB."""
    r0 = rec(
        rank=0,
        max_allocated_bytes=57 * GiB // 2,
        max_reserved_bytes=33 * GiB,
        external_bytes=3 * GiB,
        device_used_bytes=36 * GiB,
    )
    r1 = rec(rank=1, max_allocated_bytes=31 * GiB)
    r2 = rec(rank=2, max_allocated_bytes=26 * GiB)
    result = reconcile(EST, [r2, r0, r1])
    assert [r.record.rank for r in result.ranks] == [0, 1, 2]
    assert [r.verdict for r in result.ranks] == ["inside", "above", "below"]
    a0 = result.ranks[0]
    assert a0.figure("allocated").error_bytes == 0
    assert a0.figure("reserved").error_bytes == 3 * GiB // 2
    assert a0.figure("reserved").error_percent == pytest.approx(100 * 1.5 / 33)
    ext = a0.figure("external")
    assert (ext.low, ext.high, ext.verdict, ext.error_bytes) == (
        3 * GiB // 2,
        5 * GiB // 2,
        "above",
        1 * GiB,
    )
    assert a0.figure("device").verdict == "inside"
    assert result.ranks[1].figure("allocated").error_percent == pytest.approx(100 * 2.5 / 31)
    assert result.ranks[2].figure("allocated").error_bytes == -5 * GiB // 2
    assert result.ranks[1].figure("reserved").verdict == "not measured"
    assert result.warnings == () and result.notes == ()
    assert not result.all_inside


def test_error_by_category() -> None:
    """Breakdown (GiB), in reference names where the stub's groups have one: params 4 →
    weights (= 4, error 0); grads 4 → gradients; optimizer_state 8 → optimizer (the
    optimizer-phase row is not live at the backward peak, so the estimate is 8 not 9);
    activations 11.25 vs 10–12 (mid 11, error +0.25); temporaries 1.25 vs 1–2 (mid 1.5,
    error −0.25). Runtime, allocator and host rows are not categories of the allocated
    peak."""
    breakdown = {
        "params": 4 * GiB,
        "grads": 4 * GiB,
        "optimizer_state": 8 * GiB,
        "activations": 45 * GiB // 4,
        "temporaries": 5 * GiB // 4,
    }
    result = reconcile_record(EST, rec(max_allocated_bytes=57 * GiB // 2, breakdown=breakdown))
    cats = {f.name: (f.measured, f.low, f.high, f.error_bytes) for f in result.categories}
    assert cats == {
        "weights": (4 * GiB, 4 * GiB, 4 * GiB, 0),
        "gradients": (4 * GiB, 4 * GiB, 4 * GiB, 0),
        "optimizer": (8 * GiB, 8 * GiB, 8 * GiB, 0),
        "activations": (45 * GiB // 4, 10 * GiB, 12 * GiB, GiB // 4),
        "temporaries": (5 * GiB // 4, 1 * GiB, 2 * GiB, -GiB // 4),
    }


def test_unknown_category_shows_on_both_sides() -> None:
    """A measured "cache" category the ledger lacks appears as its own line (estimate
    0 → above); ledger groups missing from the breakdown show measured 0."""
    result = reconcile_record(EST, rec(max_allocated_bytes=GiB, breakdown={"cache": GiB}))
    cats = {f.name: f for f in result.categories}
    assert cats["cache"].verdict == "above" and cats["cache"].high == 0
    assert cats["weights"].measured == 0 and cats["weights"].verdict == "below"


def test_missing_estimate_figures_are_not_estimated_with_a_note() -> None:
    """An engine without reserved/device peaks or runtime rows: those figures read
    "not estimated", never a comparison with zero, and the notes say why."""
    bare = StubEstimate(
        HASH, (StubStage(rows=ROWS[:5], peak=Range(27 * GiB, 30 * GiB)),), world_size=4
    )
    r = rec(
        max_allocated_bytes=28 * GiB,
        max_reserved_bytes=30 * GiB,
        external_bytes=GiB,
        device_used_bytes=31 * GiB,
    )
    result = reconcile(bare, [r])
    verdicts = {f.name: f.verdict for f in result.ranks[0].figures}
    assert verdicts == {
        "allocated": "inside",
        "reserved": "not estimated",
        "external": "not estimated",
        "device": "not estimated",
    }
    assert len(result.notes) == 3
    assert any("reserved peak" in n for n in result.notes)


def test_pipeline_stage_choice() -> None:
    """A record naming stage 1 is compared with stage 1; a stage that does not exist
    falls back to the heaviest stage with a warning."""
    light = StubStage(rows=ROWS[:3], peak=Range(16 * GiB, 16 * GiB))
    est = StubEstimate(HASH, (STAGE, light), heaviest_stage=0, world_size=4)
    assert reconcile_record(est, rec(max_allocated_bytes=16 * GiB, pp_stage=1)).verdict == "inside"
    res = reconcile_record(est, rec(max_allocated_bytes=16 * GiB, pp_stage=7))
    assert res.stage == 0 and res.verdict == "below"
    assert any("stage 7 does not exist" in w for w in res.warnings)


def test_hash_mismatch_is_accepted_with_a_visible_warning() -> None:
    """Same hash: silent. Another hash or none: compared, with a warning naming both
    hashes, shown first in the text table. Same workload hash: a note only."""
    same = reconcile(EST, [rec(max_allocated_bytes=28 * GiB)])
    assert same.warnings == ()
    other = reconcile(EST, [rec(max_allocated_bytes=28 * GiB, config_hash="b" * 64)])
    assert len(other.warnings) == 1
    assert "bbbbbbbbbbbb" in other.warnings[0] and "aaaaaaaaaaaa" in other.warnings[0]
    assert other.ranks[0].verdict == "inside"  # accepted, still compared
    text = render(other).splitlines()
    assert text[1].startswith("WARNING: ") and "compared anyway" in text[1]
    assert reconciliation_json(other)["warnings"] == list(other.warnings)
    none = reconcile(EST, [rec(max_allocated_bytes=28 * GiB, config_hash=None)])
    assert "no config hash" in none.warnings[0]
    calibrated = reconcile(
        EST,
        [rec(max_allocated_bytes=28 * GiB, config_hash="b" * 64, workload_hash="w" * 64)],
        workload_hash="w" * 64,
    )
    assert calibrated.warnings == ()
    assert "calibrated runtime ranges" in calibrated.notes[0]


def test_world_size_mismatch_warns() -> None:
    res = reconcile_record(EST, rec(max_allocated_bytes=28 * GiB, world_size=8, rank=5))
    assert res.warnings == ("run rank 5: the run had 8 ranks, the plan has 4",)


REFERENCE_CASE = {
    "name": "smollm-135m-full-s2048-b1-ws1plain-fp32-acnone",
    "inputs": {"world_size": 1},
    "versions": {"torch": "2.13.0+cpu", "python": "3.11.7"},
    "peak_bytes": 5577059840,
    "peak_phase": "backward",
    "peak_breakdown": {
        "params": 538075648,
        "params_unsharded": 0,
        "all_gather": 0,
        "grads": 0,
        "grads_unsharded": 0,
        "reduce_scatter": 0,
        "optimizer": 1076290560,
        "activations": 3157353472,
        "temp": 805306368,
        "buffers": 1024,
        "inputs": 32768,
        "total": 5577059840,
        "optimizer_state": 1076290560,
        "optimizer_temp": 0,
    },
}


def test_reference_case_shape_maps_onto_ledger_groups() -> None:
    """weights = params 538,075,648; optimizer = optimizer_state 1,076,290,560 (the
    aggregate "optimizer" is skipped because its parts are present; optimizer_temp 0 →
    temporaries); activations 3,157,353,472; inputs 32,768; buffers 1,024; logits =
    temp 805,306,368; gathered, gradients, buckets 0. Sum 5,577,059,840 = total."""
    record = parse_record(REFERENCE_CASE)
    assert record.source == "reference-case" and record.config_hash is None
    assert record.max_allocated_bytes == 5577059840
    assert record.breakdown == {
        "weights": 538075648,
        "gathered": 0,
        "gradients": 0,
        "buckets": 0,
        "optimizer": 1076290560,
        "temporaries": 0,
        "activations": 3157353472,
        "inputs": 32768,
        "buffers": 1024,
        "logits": 805306368,
    }
    assert sum(record.breakdown.values()) == 5577059840
    bad = {**REFERENCE_CASE["peak_breakdown"], "total": 1}  # type: ignore[dict-item]
    with pytest.raises(RecordError, match="total"):
        map_reference_breakdown(bad)
    without_split = {"optimizer": 5, "total": 5}
    assert map_reference_breakdown(without_split) == {"optimizer": 5}


def test_bad_records_name_the_field() -> None:
    with pytest.raises(RecordError, match="max_alocated_bytes: unknown field"):
        parse_record({"format": "memplan-measurement", "max_alocated_bytes": 1})
    with pytest.raises(RecordError, match="rank 4 is not below world_size 4"):
        parse_record({"format": "memplan-measurement", "rank": 4, "world_size": 4})
    with pytest.raises(RecordError, match="not a measurement record"):
        parse_record({"hello": 1})


@pytest.mark.skipif(not MEASURED.is_dir(), reason="shared/reference/measured is not here")
def test_every_shared_reference_case_decomposes_consistently() -> None:
    """The fidelity suite's input, against each case's own plan: every case parses (its
    categories sum to its peak), and the estimate side of the decomposition sums to the
    estimate's peak moment exactly — every allocated byte is in one category line."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from measured_cases import load_cases, plan_for_case

    records = load_records(MEASURED / "cases.jsonl")
    cases = load_cases()
    assert len(records) == len(cases) >= 10
    for case, record in zip(cases, records, strict=True):
        assert record.label == case.name and record.breakdown is not None
        assert sum(record.breakdown.values()) == record.max_allocated_bytes
        est = estimate(plan_for_case(case))
        result = reconcile(est, [record])
        stage = est.heaviest
        cats = result.ranks[0].categories
        assert sum(f.measured or 0 for f in cats) == record.max_allocated_bytes
        assert sum(f.high or 0 for f in cats) == stage.peak.high, case.name
