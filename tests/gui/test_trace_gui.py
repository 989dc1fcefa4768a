"""Trace this plan, in the Measured tab: a worker process with progress and Cancel.

The backend is ``tests/gui/fake_trace.py`` (the real command's output, at once), except
for the one real trace at the end, which needs the ``memplan[trace]`` extra.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QTimer

from engine.planfile import PlanFile, load, save
from engine.trace import extra
from gui.trace.trace_panel import UNDO_TEXT
from tests.trace.grid import Case
from tests.trace.needs_extra import needs_trace_extra

FAKE = Path(__file__).with_name("fake_trace.py")
WAIT_MS = 60_000  # generous: a cold interpreter imports the engine on a loaded machine


def use_fake(window: Any, mode: str, gate: Path | None = None) -> None:
    window.measured.view.trace.process.command = lambda plan, steps: [
        sys.executable,
        str(FAKE),
        str(plan),
        mode,
        *([str(gate)] if gate else []),
    ]


def panel(window: Any) -> Any:
    """The trace controls, on the Measured tab brought to the front (where a user
    clicks them)."""
    window.results.setCurrentWidget(window.measured)
    return window.measured.view.trace


def test_trace_runs_beside_a_responsive_window_and_is_saved(
    qtbot: Any, window: Any, tmp_path: Path
) -> None:
    """While the trace process waits after step 1, the window keeps serving its event
    loop: a timer ticks, an edit is estimated. The record then arrives, is attached as
    one undo step, charted, and written by Save."""
    gate = tmp_path / "go"
    use_fake(window, "gate", gate)
    p = panel(window)
    assert p.button.isEnabled() and p.start()
    assert not p.button.isEnabled() and p.cancel_button.isEnabled()
    qtbot.waitUntil(lambda: "step 1 of 2" in p.status.text(), timeout=WAIT_MS)
    assert p.running and (p.bar.value(), p.bar.maximum()) == (3, 5)
    ticks: list[int] = []
    timer = QTimer(window)
    timer.timeout.connect(lambda: ticks.append(1))
    timer.start(5)
    qtbot.waitUntil(lambda: len(ticks) >= 3)
    timer.stop()
    traced_hash = window.doc.plan.config_hash()
    assert window.doc.set("batch.seq_len", 2048)
    qtbot.waitUntil(lambda: window.doc.estimate.config_hash != traced_hash)
    assert p.running  # the trace went on while the window worked
    gate.write_text("go")
    qtbot.waitUntil(lambda: not p.running, timeout=WAIT_MS)
    assert len(window.doc.measurements) == 1
    record = window.doc.measurements[0]
    assert record["kind"] == "trace" and record["config_hash"] == traced_hash
    assert window.doc.undo_stack.undoText() == UNDO_TEXT
    assert "Traced in" in p.status.text() and "plan changed during the trace" in p.status.text()
    assert (
        window.measured.view.chart.isVisible() and window.measured.view.chart.comparison is not None
    )
    text = window.measured.view.toPlainText()
    assert "simulated (trace)" in text and "Where the trace and the ledger differ" in text
    assert "WARNING: traced for config" in text  # the plan was edited since
    window.doc.undo_stack.undo()  # the record
    assert window.doc.measurements == () and not window.measured.view.chart.isVisible()
    window.doc.undo_stack.redo()
    out = tmp_path / "traced.memplan"
    window.doc.save(out)
    assert load(out).measurements[0]["kind"] == "trace"


def test_cancel_kills_the_trace_process(qtbot: Any, window: Any) -> None:
    use_fake(window, "hang")
    p = panel(window)
    assert p.start()
    qtbot.waitUntil(lambda: "step 1 of 2" in p.status.text(), timeout=WAIT_MS)
    pid = p.process._proc.processId()
    p.cancel_button.click()
    qtbot.waitUntil(lambda: not p.running, timeout=WAIT_MS)
    assert p.status.text() == "Trace cancelled." and window.doc.measurements == ()
    assert p.button.isEnabled() and not p.cancel_button.isEnabled()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_closing_the_window_kills_a_running_trace(qtbot: Any, window: Any) -> None:
    use_fake(window, "hang")
    p = panel(window)
    assert p.start()
    qtbot.waitUntil(lambda: "step 1 of 2" in p.status.text(), timeout=WAIT_MS)
    pid = p.process._proc.processId()
    window.close()
    assert not p.running
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_trace_outlived_by_its_plan_is_dropped(qtbot: Any, window: Any, tmp_path: Path) -> None:
    """Another file opened while the trace ran: the record is not the new plan's."""
    gate = tmp_path / "go"
    use_fake(window, "gate", gate)
    p = panel(window)
    assert p.start()
    qtbot.waitUntil(lambda: "step 1 of 2" in p.status.text(), timeout=WAIT_MS)
    other = tmp_path / "other.memplan"
    save(PlanFile(plan=Case("llama", {"strategy": "fsdp4"}).plan(), name="other"), other)
    window.doc.open(other)
    gate.write_text("go")
    qtbot.waitUntil(lambda: not p.running, timeout=WAIT_MS)
    assert window.doc.measurements == ()
    assert "another plan was opened: its record was dropped" in p.status.text()


def test_a_refusal_from_the_process_is_reported(qtbot: Any, window: Any) -> None:
    use_fake(window, "refuse")
    p = panel(window)
    assert p.start()
    qtbot.waitUntil(lambda: not p.running, timeout=WAIT_MS)
    assert p.status.text() == "Trace failed: DeepSpeed (ZeRO) cannot be traced: a stand-in reason"
    assert window.doc.measurements == ()


def test_a_plan_the_trace_cannot_run_is_refused_before_running(qtbot: Any, window: Any) -> None:
    assert window.doc.set("parallelism.strategy", "zero3")
    qtbot.waitUntil(lambda: not window.doc.pending)
    p = panel(window)
    assert not p.button.isEnabled()
    assert p.status.text().startswith("Cannot trace this plan: DeepSpeed is traced on real CPU")
    assert not p.start() and not p.running


def test_without_the_extra_the_button_names_the_install(
    qtbot: Any, window: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(extra, "missing_packages", lambda: ["torch"])
    window.measured.view.show_document(window.doc, window.units)
    p = panel(window)
    assert not p.button.isEnabled() and "pip install 'memplan[trace]'" in p.button.toolTip()
    assert not p.start()


@needs_trace_extra
def test_a_real_trace_from_the_window(qtbot: Any, window: Any, tmp_path: Path) -> None:
    """A tiny Llama on FSDP2 × 4, traced by ``memplan trace`` in a child process."""
    path = tmp_path / "tiny.memplan"
    save(PlanFile(plan=Case("llama", {"strategy": "fsdp4"}).plan(), name="tiny"), path)
    window.doc.open(path)
    p = panel(window)
    steps: list[str] = []
    p.process.progress.connect(lambda _d, _t, message: steps.append(message))
    assert p.start()
    qtbot.waitUntil(lambda: not p.running, timeout=300_000)
    assert p.status.text().startswith("Traced in"), p.status.text()
    assert any("build:" in s for s in steps) and any("done:" in s for s in steps)
    record = window.doc.measurements[-1]
    assert record["config_hash"] == window.doc.plan.config_hash()
    cmp = window.measured.view.chart.comparison
    assert cmp is not None and cmp.peak.traced == record["max_allocated_bytes"] > 0
    assert json.loads(json.dumps(record))["extra"]["setup"]["world_size"] == 4
