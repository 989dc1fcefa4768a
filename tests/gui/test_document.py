"""PlanDocument: edits, validation at the field, coalescing, undo/redo, files, recovery."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.plan import default_plan
from engine.planfile import PlanFileError
from gui.document import PlanDocument
from gui.files.autosave import Autosaver, find_orphans

DEFAULT_STATES = 16_060_671_488


def test_default_estimate_has_the_hand_derived_model_states(qtbot: Any) -> None:
    """Llama-3.1-8B has 8,030,261,248 parameters; FSDP2 over DP 8 holds 1/8 of each.
    fp32 weights, fp32 grads and AdamW's two fp32 moments: 4 × 8,030,261,248 × 4 / 8 =
    16,060,522,496 B, plus 291 step counters (4 B each, one 512-B allocation each, one
    per tensor, 291 × 512 = 148,992 B): 16,060,671,488 B."""
    doc = PlanDocument()
    assert doc.estimate is not None
    states = sum(
        r.high
        for r in doc.estimate.rows
        if r.kind == "persistent" and r.group in ("weights", "gradients", "optimizer")
    )
    assert states == DEFAULT_STATES


def test_edits_in_one_turn_are_computed_once(qtbot: Any) -> None:
    """Two edits before the event loop runs give one recompute, of the final plan."""
    doc = PlanDocument()
    seen: list[str] = []
    doc.estimateChanged.connect(lambda: seen.append(doc.estimate.config_hash))  # type: ignore[union-attr]
    assert doc.set("parallelism.dp", 4, merge=False)
    assert doc.set("batch.seq_len", 8192, merge=False)
    assert doc.pending
    qtbot.waitUntil(lambda: not doc.pending)
    assert seen == [doc.plan.config_hash()]


def test_invalid_value_is_reported_at_the_field_and_changes_nothing(qtbot: Any) -> None:
    doc = PlanDocument()
    before_plan, before_est = doc.plan, doc.estimate
    errors: list[tuple[str, str]] = []
    doc.fieldError.connect(lambda p, m: errors.append((p, m)))
    assert not doc.set("batch.seq_len", -1)
    assert errors and errors[0][0] == "batch.seq_len"
    assert "batch.seq_len" in errors[0][1] and "must be at least 1" in errors[0][1]
    assert doc.plan is before_plan and doc.estimate is before_est
    assert doc.undo_stack.count() == 0


def test_uncomputable_plan_keeps_the_last_valid_estimate(qtbot: Any) -> None:
    """TP 3 does not divide Llama's 32 heads: the plan is stored (it can be saved and
    fixed) but the engine refuses it, so the previous estimate stays, marked stale."""
    doc = PlanDocument()
    last = doc.estimate
    failures: list[str] = []
    doc.estimateFailed.connect(failures.append)
    assert doc.set("parallelism.tp", 3)
    doc.flush()
    assert failures and "parallelism.tp" in failures[0]
    assert doc.estimate is last and doc.stale
    assert [p.fields for p in doc.estimate_problems] == [
        ("parallelism.tp", "model.architecture.heads")
    ]


def test_typing_in_one_field_merges_into_one_undo_step(qtbot: Any) -> None:
    doc = PlanDocument()
    for value in (8, 81, 819, 8192):
        doc.set("batch.seq_len", value)
    assert doc.undo_stack.count() == 1
    doc.end_merge()
    doc.set("batch.seq_len", 1024)
    assert doc.undo_stack.count() == 2
    doc.undo_stack.undo()
    assert doc.plan.batch.seq_len == 8192
    doc.undo_stack.undo()
    assert doc.plan.batch.seq_len == 4096
    assert not doc.dirty


EDITS = st.lists(
    st.sampled_from(
        [
            ("parallelism.dp", 4),
            ("parallelism.dp", 2),
            ("batch.seq_len", 8192),
            ("method.optimizer.name", "sgd"),
            ("method.optimizer.name", "lion"),
            ("parallelism.strategy", "zero3"),
            ("policy.headroom_percent", 20.0),
            ("hardware.usable_policy", "marketed"),
            ("model.architecture.layers", 16),
        ]
    ),
    min_size=1,
    max_size=8,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(edits=EDITS)
def test_undo_and_redo_restore_identical_plan_hashes(
    qtbot: Any, edits: list[tuple[str, Any]]
) -> None:
    """Undoing every step walks back through exactly the hashes seen going forward."""
    doc = PlanDocument()
    hashes = [doc.plan.config_hash()]
    for path, value in edits:
        doc.set(path, value, merge=False)
        if doc.plan.config_hash() != hashes[-1]:
            hashes.append(doc.plan.config_hash())
    assert doc.undo_stack.count() == len(hashes) - 1
    for expected in reversed(hashes[:-1]):
        doc.undo_stack.undo()
        assert doc.plan.config_hash() == expected
    assert doc.plan.config_hash() == default_plan().config_hash()
    for expected in hashes[1:]:
        doc.undo_stack.redo()
        assert doc.plan.config_hash() == expected
    doc.flush()
    assert doc.estimate is not None and doc.estimate.config_hash == hashes[-1]


def test_save_and_open_round_trip(qtbot: Any, tmp_path: Path) -> None:
    doc = PlanDocument()
    doc.set_many({"parallelism.dp": 4, "batch.seq_len": 8192}, "two fields")
    assert doc.dirty
    target = doc.save(tmp_path / "plan.memplan")
    assert not doc.dirty
    other = PlanDocument()
    other.open(target)
    assert other.plan.config_hash() == doc.plan.config_hash()
    assert other.path == target and not other.dirty
    assert other.estimate is not None and other.estimate.config_hash == doc.plan.config_hash()


def test_corrupt_file_raises_and_changes_nothing(qtbot: Any, tmp_path: Path) -> None:
    bad = tmp_path / "bad.memplan"
    bad.write_text('{"format": "memplan", "schema_version": 1, "plan": {', encoding="utf-8")
    doc = PlanDocument()
    doc.set("parallelism.dp", 4)
    before = doc.plan.config_hash()
    with pytest.raises(PlanFileError, match="not valid JSON"):
        doc.open(bad)
    assert doc.plan.config_hash() == before and doc.path is None and doc.dirty


def test_autosave_then_recover_after_a_crash(qtbot: Any, tmp_path: Path, dead_pid: int) -> None:
    """An autosave whose process is gone is offered back, with the unsaved plan."""
    state = tmp_path / "state"
    doc = PlanDocument()
    saver = Autosaver(doc, directory=state, interval_ms=3_600_000)
    assert not saver.tick()  # nothing unsaved yet
    doc.set("batch.seq_len", 2048)
    assert saver.tick()
    assert find_orphans(state) == []  # this process is alive: not an orphan
    meta = saver.meta_path.read_text(encoding="utf-8")
    saver.meta_path.write_text(
        meta.replace(f'"pid": {os.getpid()}', f'"pid": {dead_pid}'), encoding="utf-8"
    )
    orphans = find_orphans(state)
    assert len(orphans) == 1 and orphans[0].original is None
    fresh = PlanDocument()
    fresh.recover(orphans[0].plan_path, orphans[0].original)
    assert fresh.plan.config_hash() == doc.plan.config_hash()
    assert fresh.dirty and fresh.path is None


def test_saving_removes_the_autosave(qtbot: Any, tmp_path: Path) -> None:
    doc = PlanDocument()
    saver = Autosaver(doc, directory=tmp_path / "state", interval_ms=3_600_000)
    doc.set("batch.seq_len", 2048)
    assert saver.tick() and saver.plan_path.exists()
    doc.save(tmp_path / "p.memplan")
    assert not saver.plan_path.exists() and not saver.meta_path.exists()
