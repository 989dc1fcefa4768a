"""Background jobs: the slow parts of a plan's analysis, computed off the GUI thread.

The estimate is sub-millisecond and stays on the GUI thread; the layout search, the
diagnostics, the fit searches and the sensitivity re-estimate tens to thousands of plans,
so they run here and arrive one part at a time by :attr:`AnalysisWorker.partReady`,
tagged with the config hash of the plan they were computed for. The receiver drops a
result whose hash is not the plan on screen (the user typed on meanwhile): a stale
result never reaches a view.

One job runs at a time. Asking for a newer plan drops the queued job and tells the
running one to stop before its next part; the part in progress finishes (its result is
kept by :func:`engine.analysis.analysis`, so going back to that plan costs nothing).
:class:`TaskRunner` runs the slow things a user starts by hand (a sweep, a comparison)
the same way: off the GUI thread, with progress, Cancel, and only the latest result kept.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal

from engine.analysis import SLOW_PARTS, Part, analysis
from engine.errors import PlanError
from engine.plan import Plan

SHUTDOWN_WAIT_MS = 30_000
"""How long closing the window waits for the part in progress (a large model's search
takes seconds); the job's result then goes nowhere."""


class _Relay(QObject):
    """Carries one job's results from the pool thread to the GUI thread.

    Created on the GUI thread and owned by its job, so a signal emitted from the pool
    thread is queued to the worker; if the worker is gone, the connection is too.
    """

    part = Signal(str, str, object)  # config hash, part name, value or PlanError
    done = Signal(object)  # the job


class AnalysisJob(QRunnable):
    """Compute the slow parts of one plan's analysis, in order, unless cancelled."""

    def __init__(self, plan: Plan, parts: tuple[Part, ...] = SLOW_PARTS) -> None:
        super().__init__()
        self.plan, self.parts = plan, parts
        self.relay = _Relay()
        self.cancelled = threading.Event()

    def run(self) -> None:
        a = analysis(self.plan)
        try:
            for name in self.parts:
                if self.cancelled.is_set():
                    return
                try:
                    value: object = a.get(name)
                except PlanError as exc:
                    value = exc
                self.relay.part.emit(a.config_hash, name, value)
        finally:
            self.relay.done.emit(self)


class AnalysisWorker(QObject):
    """Runs :class:`AnalysisJob` s one at a time; re-emits their parts on the GUI thread."""

    partReady = Signal(str, str, object)  # config hash, part name, value or PlanError

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.pool = QThreadPool()
        self.pool.setMaxThreadCount(1)
        self._jobs: set[AnalysisJob] = set()  # alive until their `done` reaches us

    def submit(self, plan: Plan) -> AnalysisJob:
        """Compute ``plan``'s slow parts; jobs for earlier plans are dropped or stopped."""
        self.cancel()
        job = AnalysisJob(plan)
        job.setAutoDelete(False)  # Python owns it: it outlives run() until `done` arrives
        job.relay.part.connect(self.partReady)
        job.relay.done.connect(self._finished)
        self._jobs.add(job)
        self.pool.start(job)
        return job

    def cancel(self) -> None:
        """Drop the queued job and stop the running one before its next part."""
        for job in list(self._jobs):
            if self.pool.tryTake(job):  # never started: it will send no `done`
                self._jobs.discard(job)
            else:
                job.cancelled.set()

    @property
    def busy(self) -> bool:
        return self.pool.activeThreadCount() > 0

    def _finished(self, job: AnalysisJob) -> None:
        self._jobs.discard(job)

    def shutdown(self, wait_ms: int = SHUTDOWN_WAIT_MS) -> bool:
        """Stop, and wait for the part in progress (True when nothing runs any more)."""
        self.cancel()
        return bool(self.pool.waitForDone(wait_ms))


TaskFn = Callable[[Callable[[int, int], bool]], object]
"""A task: given a progress callback (done, total) → keep going?, returns its result."""


class _TaskRelay(QObject):
    progress = Signal(int, int)
    done = Signal(object, object)  # the task, its result (or the exception it raised)


class Task(QRunnable):
    """One slow computation on the pool, with progress and a cancel flag it polls."""

    def __init__(self, fn: TaskFn) -> None:
        super().__init__()
        self.fn = fn
        self.relay = _TaskRelay()
        self.cancelled = threading.Event()

    def _progress(self, done: int, total: int) -> bool:
        self.relay.progress.emit(done, total)
        return not self.cancelled.is_set()

    def run(self) -> None:
        try:
            result: object = self.fn(self._progress)
        except Exception as exc:  # a failed task reports, it never kills the pool thread
            result = exc
        with contextlib.suppress(RuntimeError):  # the relay is gone (the app is closing)
            self.relay.done.emit(self, result)


class TaskRunner(QObject):
    """Runs one user-started task at a time (a sweep, a comparison) off the GUI thread.

    ``progress`` and ``finished`` arrive on the GUI thread; a task started while another
    runs cancels the older one, whose result is then dropped (only the latest task's
    result is ever emitted). ``failed`` carries the message of an exception.
    """

    progress = Signal(int, int)
    finished = Signal(object)
    failed = Signal(str)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.pool = QThreadPool()
        self.pool.setMaxThreadCount(1)
        self._current: Task | None = None
        self._tasks: set[Task] = set()

    def start(self, fn: TaskFn) -> Task:
        """Run ``fn`` on the pool; an older task still running is cancelled and its
        result dropped."""
        self.cancel()
        self._current = None
        task = Task(fn)
        task.setAutoDelete(False)
        task.relay.progress.connect(self._progress)
        task.relay.done.connect(self._done)
        self._tasks.add(task)
        self._current = task
        self.pool.start(task)
        return task

    def cancel(self) -> None:
        """Ask the running task to stop at its next progress report; what it computed
        so far still arrives by ``finished`` (a sweep keeps its points, marked
        cancelled). A task that never started is dropped."""
        for task in list(self._tasks):
            if self.pool.tryTake(task):
                self._tasks.discard(task)
                if task is self._current:
                    self._current = None
            else:
                task.cancelled.set()

    @property
    def busy(self) -> bool:
        return self._current is not None

    def _progress(self, done: int, total: int) -> None:
        task = self.sender()
        if self._current is not None and task is self._current.relay:
            self.progress.emit(done, total)

    def _done(self, task: Task, result: object) -> None:
        self._tasks.discard(task)
        if task is not self._current:
            return  # superseded or cancelled: nobody waits for it
        self._current = None
        if isinstance(result, Exception):
            self.failed.emit(f"{type(result).__name__}: {result}")
        else:
            self.finished.emit(result)

    def shutdown(self, wait_ms: int = SHUTDOWN_WAIT_MS) -> bool:
        self.cancel()
        return bool(self.pool.waitForDone(wait_ms))
