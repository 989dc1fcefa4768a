"""The status bar's job (the report export's progress and Cancel) is never drawn under a
status-bar message.

Seen under Xvfb at 1366×768: Cancel an export, export again within 5 s, and the status
bar showed "Report cancelled: nothing was written" painted through "Writing pages…".
QStatusBar draws its temporary message over the normal widgets' area and hides those
widgets only when a message arrives (``QStatusBar::hideOrShow``), so a widget shown
explicitly while a message is up overlaps it. ``JobStatus.begin`` clears the message.
"""

from __future__ import annotations

from typing import Any


def _window_with_job(qtbot: Any) -> tuple[Any, Any]:
    from PySide6.QtWidgets import QMainWindow

    from gui.workers.job_status import JobStatus

    win = QMainWindow()
    qtbot.addWidget(win)
    job = JobStatus(win)
    win.statusBar().addWidget(job)
    win.show()
    qtbot.waitExposed(win)
    return win, job


def test_a_job_begun_under_a_message_clears_it(qtbot: Any) -> None:
    win, job = _window_with_job(qtbot)
    win.statusBar().showMessage("Report cancelled: nothing was written", 5_000)
    assert not job.isVisible()
    job.begin("Writing the report…", lambda: None)
    # old code: the message stayed (5 s) with the job's label drawn through it
    assert win.statusBar().currentMessage() == ""
    assert job.isVisible() and job.text.text() == "Writing the report…"


def test_a_message_during_the_job_hides_it_until_the_message_goes(qtbot: Any) -> None:
    """Qt's own rule, kept: a message that comes while the job runs (a save's "Saved …")
    hides the job, which comes back when the message is cleared or times out."""
    win, job = _window_with_job(qtbot)
    job.begin("Writing the report…", lambda: None)
    win.statusBar().showMessage("Saved plan.memplan")
    assert not job.isVisible()
    win.statusBar().clearMessage()
    assert job.isVisible()
    job.end()
    assert not job.isVisible()


def test_escape_on_the_jobs_cancel_button_cancels(qtbot: Any) -> None:
    """The module's promise ("Cancel, or Escape while the bar has the focus"): under
    Xvfb, Escape with the focus on Cancel let the export write its PDF."""
    from PySide6.QtCore import Qt

    _win, job = _window_with_job(qtbot)
    cancelled: list[str] = []
    job.begin("Writing the report…", lambda: cancelled.append("cancel"))
    qtbot.keyClick(job.cancel_button, Qt.Key.Key_Escape)
    assert cancelled == ["cancel"]
    job.end()  # no job: Escape is the window's again
    qtbot.keyClick(job.cancel_button, Qt.Key.Key_Escape)
    assert cancelled == ["cancel"]


def test_the_cancel_button_keeps_its_size_in_a_wide_window(qtbot: Any) -> None:
    """Under Xvfb at 1920×1080 the status bar gave the job its spare width and the
    Cancel button grew to ~250 px (about 160 px at 1366×768)."""
    win, job = _window_with_job(qtbot)
    win.resize(1700, 400)
    job.begin("Writing pages…", lambda: None)
    qtbot.waitUntil(lambda: win.width() == 1700)
    assert job.cancel_button.width() == job.cancel_button.sizeHint().width()
    assert job.bar.width() == 160  # the bar, though, keeps the width it had stretched
