"""TaskRunner frees what a finished task held, and a task dropped before it started never
runs.

The leak this pins: each task was a ``QRunnable`` with ``setAutoDelete(False)`` given to
``QThreadPool.start``. PySide's binding of that call makes the runnable a child of the
pool (``typesystem_core_common.xml``, ``QThreadPool`` ``start(QRunnable*,int)``:
``<parent index="this" action="add"/>``), a Python reference dropped only when Qt deletes
the runnable — which auto-delete off never does. So every task, its relay QObject and its
closure (a sweep's or a report's whole plan) lived as long as the runner: 200 tasks, 200
relays. The runner now has one relay, and hands the pool a plain callable, whose
reference PySide drops when it has run.
"""

from __future__ import annotations

import gc
import threading
import weakref
from typing import Any


class _Payload:
    """Something a task's closure holds (a plan, in the window)."""


def _relays() -> int:
    """Live relay objects of any runner (by class name: the class is private)."""
    return sum(
        type(o).__name__ == "_TaskRelay" and type(o).__module__ == "gui.workers.workers"
        for o in gc.get_objects()
    )


def _start_holding(runner: Any, i: int) -> weakref.ref[_Payload]:
    """Start a task whose closure holds a fresh payload; only a weak reference is kept
    here, so the payload lives exactly as long as the runner keeps the task."""
    payload = _Payload()
    runner.start(lambda _progress, held=payload: (held, i)[1])
    return weakref.ref(payload)


def test_finished_tasks_leave_nothing_alive(qtbot: Any) -> None:
    from gui.workers.workers import TaskRunner

    gc.collect()
    before = _relays()
    runner = TaskRunner()
    results: list[object] = []
    runner.finished.connect(results.append)
    held = []
    for i in range(50):
        held.append(_start_holding(runner, i))
        qtbot.waitUntil(lambda n=i + 1: len(results) == n)
    assert runner.shutdown() and results == list(range(50))
    gc.collect()
    # the old runner: 50 payloads and 50 relays alive (one Task each, kept by the pool)
    assert [r for r in held if r() is not None] == []
    assert _relays() - before == 1  # the runner's own relay, child of the runner


def test_a_task_dropped_before_it_started_never_runs(qtbot: Any) -> None:
    """Cancel with a task queued behind a running one: the queued one is dropped at once
    (``busy`` is False, as ``ReportExport.cancel`` relies on), its function never runs,
    and what it held is freed; the running one is told to stop and its result dropped."""
    from gui.workers.workers import TaskRunner

    runner = TaskRunner()
    results: list[object] = []
    runner.finished.connect(results.append)
    started, gate = threading.Event(), threading.Event()
    ran: list[str] = []

    def running(progress: Any) -> str:
        started.set()
        gate.wait(30)
        ran.append("running")
        return "stopped" if not progress(1, 2) else "went on"

    def queued(progress: Any) -> str:
        ran.append("queued")
        return "queued"

    runner.start(running)
    qtbot.waitUntil(started.is_set)
    runner.start(queued)  # waits for the one pool thread; `running` is cancelled
    assert runner.busy
    runner.cancel()
    assert not runner.busy  # the queued task was dropped, nothing will arrive
    gate.set()
    assert runner.shutdown()
    qtbot.wait(50)  # let any (wrongly) queued result arrive
    assert ran == ["running"] and results == []


def test_a_runner_deleted_mid_task_waits_and_the_task_is_told_to_stop(qtbot: Any) -> None:
    """The relay is the runner's child; a runner deleted by its parent while a task runs
    (a dialog's Check when the window closes, no ``shutdown``) must not delete the relay
    under the task that emits on it: the deletion tells the task to stop and waits."""
    import shiboken6
    from PySide6.QtCore import QObject

    from gui.workers.workers import TaskRunner

    parent = QObject()
    runner = TaskRunner(parent)
    started, gate = threading.Event(), threading.Event()
    said: list[object] = []

    def job(progress: Any) -> str:
        started.set()
        gate.wait(30)
        try:
            said.append(progress(1, 2))
        except RuntimeError as exc:  # the relay deleted under it
            said.append(exc)
        return "done"

    runner.start(job)
    qtbot.waitUntil(started.is_set)
    threading.Timer(0.2, gate.set).start()
    shiboken6.delete(parent)  # deletes the runner and its relay, on this thread
    assert said == [False]  # it ran to its check, was told to stop, nothing raised
