"""TaskRunner: user-started jobs off the GUI thread, progress, Cancel, only the latest
result delivered, failures reported."""

from __future__ import annotations

import threading
from typing import Any


def test_result_progress_and_thread(qtbot: Any) -> None:
    from gui.workers.workers import TaskRunner

    runner = TaskRunner()
    seen: list[tuple[int, int]] = []
    results: list[object] = []
    runner.progress.connect(lambda d, t: seen.append((d, t)))
    runner.finished.connect(results.append)
    where: list[int] = []

    def job(progress: Any) -> str:
        where.append(threading.get_ident())
        for i in range(3):
            progress(i + 1, 3)
        return "done"

    runner.start(job)
    qtbot.waitUntil(lambda: results == ["done"])
    assert seen == [(1, 3), (2, 3), (3, 3)] and where[0] != threading.get_ident()
    assert not runner.busy and runner.shutdown()


def test_a_newer_task_drops_the_older_result_and_cancel_is_polled(qtbot: Any) -> None:
    from gui.workers.workers import TaskRunner

    runner = TaskRunner()
    results: list[object] = []
    runner.finished.connect(results.append)
    gate = threading.Event()

    def slow(progress: Any) -> str:
        gate.wait(30)
        return "stopped" if not progress(1, 2) else "old"

    runner.start(slow)
    runner.start(lambda progress: "new")
    gate.set()
    qtbot.waitUntil(lambda: results == ["new"])
    assert runner.shutdown() and results == ["new"]


def test_cancel_delivers_what_the_task_returns(qtbot: Any) -> None:
    from gui.workers.workers import TaskRunner

    runner = TaskRunner()
    results: list[object] = []
    runner.finished.connect(results.append)
    started, gate = threading.Event(), threading.Event()

    def job(progress: Any) -> str:
        started.set()
        gate.wait(30)
        return "cancelled" if not progress(1, 2) else "finished"

    runner.start(job)
    qtbot.waitUntil(started.is_set)
    runner.cancel()
    gate.set()
    qtbot.waitUntil(lambda: results == ["cancelled"])
    assert runner.shutdown()


def test_failure_is_reported(qtbot: Any) -> None:
    from gui.workers.workers import TaskRunner

    runner = TaskRunner()
    failed: list[str] = []
    runner.failed.connect(failed.append)

    def job(progress: Any) -> str:
        raise ValueError("no such plan")

    runner.start(job)
    qtbot.waitUntil(lambda: bool(failed))
    assert failed == ["ValueError: no such plan"] and runner.shutdown()
