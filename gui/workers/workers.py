"""Background tasks a user starts by hand (a sweep, a comparison), off the GUI thread.

:class:`TaskRunner` runs one at a time on a pool thread, with progress, Cancel, and only
the latest task's result kept. (The window's own analysis after each edit runs in a
child process instead: :mod:`gui.workers.analysis_worker`.)
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

from PySide6.QtCore import QObject, QThreadPool, Signal

SHUTDOWN_WAIT_MS = 30_000
"""How long closing the window waits for the task in progress (a large model's search
takes seconds); the task's result then goes nowhere."""


TaskFn = Callable[[Callable[[int, int], bool]], object]
"""A task: given a progress callback (done, total) → keep going?, returns its result."""


class _TaskRelay(QObject):
    """The runner's one way back to the GUI thread: made there, a child of the runner,
    and emitted from the pool thread (a queued connection). One per runner, not one per
    task, so no QObject is ever made or deleted on the pool thread."""

    progress = Signal(object, int, int)  # the task, done, total
    done = Signal(object, object)  # the task, its result (or the exception it raised)


class Task:
    """One slow computation on the pool, with progress and a cancel flag it polls.

    A plain object handed to the pool as a callable, not a ``QRunnable``: PySide's
    ``QThreadPool.start(QRunnable)`` keeps a Python reference to the runnable until Qt
    deletes it (the pool becomes its parent), which with auto-delete off was never, so
    every task, its relay and its closure lived as long as the runner. A callable's
    reference is dropped once it has run."""

    def __init__(self, fn: TaskFn, relay: _TaskRelay) -> None:
        self.fn = fn
        self.relay = relay
        self.cancelled = threading.Event()
        self._lock = threading.Lock()
        self._started = False
        self._dropped = False

    def drop(self) -> bool:
        """Make sure a task that has not started never does; False when it has started
        (then only its cancel flag can stop it)."""
        with self._lock:
            self._dropped = not self._started
            return self._dropped

    def _progress(self, done: int, total: int) -> bool:
        self.relay.progress.emit(self, done, total)
        return not self.cancelled.is_set()

    def run(self) -> None:
        with self._lock:
            if self._dropped:
                return  # cancelled while it waited for the pool: nobody waits for it
            self._started = True
        try:
            result: object = self.fn(self._progress)
        except Exception as exc:  # a failed task reports, it never kills the pool thread
            result = exc
        with contextlib.suppress(RuntimeError):  # the relay is gone (the app is closing)
            self.relay.done.emit(self, result)


def _stop_on_destroy(pool: QThreadPool, tasks: set[Task]) -> Callable[..., None]:
    """What a runner deleted with a task still running does (its parent closed without
    :meth:`TaskRunner.shutdown`: an export dialog's Check when the window closes): tell
    the tasks to stop and wait for them, before Qt deletes the relay they emit on (a
    child of the runner, deleted after ``destroyed``). Holds no reference to the runner."""

    def stop(*_args: object) -> None:
        for task in list(tasks):
            task.cancelled.set()
        with contextlib.suppress(RuntimeError):  # the pool went first (exit): it waited
            pool.waitForDone(SHUTDOWN_WAIT_MS)

    return stop


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
        self._relay = _TaskRelay(self)
        self._relay.progress.connect(self._progress)
        self._relay.done.connect(self._done)
        self._current: Task | None = None
        self._tasks: set[Task] = set()
        self.destroyed.connect(_stop_on_destroy(self.pool, self._tasks))

    def start(self, fn: TaskFn) -> Task:
        """Run ``fn`` on the pool; an older task still running is cancelled and its
        result dropped."""
        self.cancel()
        self._current = None
        task = Task(fn, self._relay)
        self._tasks.add(task)
        self._current = task
        self.pool.start(task.run)
        return task

    def cancel(self) -> None:
        """Ask the running task to stop at its next progress report; what it computed
        so far still arrives by ``finished`` (a sweep keeps its points, marked
        cancelled). A task that never started is dropped."""
        for task in list(self._tasks):
            if task.drop():
                self._tasks.discard(task)
                if task is self._current:
                    self._current = None
            else:
                task.cancelled.set()

    @property
    def busy(self) -> bool:
        return self._current is not None

    def _progress(self, task: Task, done: int, total: int) -> None:
        if task is self._current:
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
