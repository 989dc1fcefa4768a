"""Cancel in the window's report export, pressed as a user presses it: the status bar's
Cancel button, at the moment step 1 has passed its last check (found driving the window
under Xvfb: File → Export Report…, Cancel at "Computing the report's figures…" 5 of 6).

The defect this pins: ``ReportExport.cancel`` during step 1 stopped the painter and then
waited for the gathering's result to say "cancelled". A gathering past its last progress
check (``gather_step``: the content and its HTML come after it) returns its figures, not
``CANCELLED``; ``_step_done`` then sent them to the painter it had just stopped, which
ignores a job it has no process for: the export stayed "Writing pages…" for good, its
Cancel did nothing, and ``busy`` stayed True.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, cast

import pytest


def test_cancel_after_the_last_check_of_step_one_ends_the_export(
    qtbot: Any, window: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gui.report import export_job

    past_check, gate = threading.Event(), threading.Event()

    def late_gather(_pf: Any, _units: Any, _extras: Any, progress: Any) -> object:
        """As ``gather_step`` after its last ``progress`` check: it goes on to return its
        figures whatever Cancel said (held at ``gate`` until Cancel is pressed)."""
        progress(5, 6)
        past_check.set()
        gate.wait(30)
        return export_job.Gathered(cast(Any, None), "")

    monkeypatch.setattr(export_job, "gather_step", late_gather)
    actions = window.report_actions
    job = actions.job
    said: list[str] = []
    job.cancelled.connect(lambda: said.append("cancelled"))
    job.written.connect(lambda path, pages: said.append(f"written {path}"))
    job.failed.connect(lambda message: said.append(f"failed {message}"))
    folder = tmp_path / "out"
    folder.mkdir()
    assert actions.export_to(str(folder / "r.pdf"), "a4")
    qtbot.waitUntil(past_check.is_set, timeout=10_000)
    assert actions.status.isVisible()
    actions.status.cancel_button.click()
    gate.set()
    qtbot.waitUntil(lambda: not job.runner.busy, timeout=10_000)  # its figures arrived
    qtbot.wait(50)
    # old code: said == [], job.busy and the status bar's job still showing
    assert said == ["cancelled"] and not job.busy and not actions.status.isVisible()
    assert window.statusBar().currentMessage() == "Report cancelled: nothing was written"
    assert list(folder.iterdir()) == [] and actions.last_written is None
