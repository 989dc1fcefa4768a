"""The window's analysis worker: the slow parts of a plan, computed in a child process.

The estimate is sub-millisecond and stays on the GUI thread; the layout search, the
diagnostics, the fit searches and the sensitivity re-estimate tens to thousands of plans.
They run in :mod:`gui.workers.analysis_server` under :class:`QProcess` — a thread would hold the
GIL the GUI thread needs for every call into Qt, and the window stalled half a second
after an edit (seconds for the largest models). The process's output arrives through the
event loop, so the window never waits for it.

Parts arrive one at a time by :attr:`AnalysisWorker.partReady`, tagged with the config
hash of the plan they were computed for; the receiver drops a result whose hash is not
the plan on screen. Each part is also kept in the window's own
:func:`engine.analysis.analysis` of that plan (a report written afterwards, or going back
to that plan by undo, finds it there and asks the process for nothing).

Asking for a newer plan tells the process, which abandons the older job before its next
part; a part that runs on past :data:`CANCEL_GRACE_MS` (a large model's search) is
stopped by killing the process, and a fresh one takes the newest job. A process that
dies on its own is reported by :attr:`AnalysisWorker.failed` with its reason; the window
keeps working, and the next plan starts a new process.

The same process counts the model presets' parameters for the Model tab's chooser
(:meth:`AnalysisWorker.request_totals`) when it has no job: each count builds a whole
tensor inventory, work the window's process no longer does. A count not yet answered
is asked again of a process that replaces a killed one.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable

from PySide6.QtCore import QObject, QProcess, QProcessEnvironment, QTimer, Signal

from engine.analysis import Part, analysis
from engine.errors import PlanError
from engine.plan import Plan
from gui.workers.analysis_server import TOTALS, decode, encode
from gui.workers.child_process import child_environment, discard

WINDOW_PARTS: tuple[Part, ...] = ("counts", "diagnosis", "fit", "sensitivity", "lever_summaries")
"""The slow parts the window shows or its report prints, in the order they are wanted.
The fit levers come last, and as their summaries (``engine.layout.levers.LeverSummary``),
not the levers themselves: they cost the most (for DeepSeek-V3 ~23 s of the process's
CPU, five more searches), so the counts never wait for them and a newer edit abandons
them like any part (killed after :data:`CANCEL_GRACE_MS`); and a lever holds its whole
search (0.7 MB for DeepSeek-V3's five, ~60 ms of the GUI thread to unpickle) where its
summary is a few hundred bytes."""

CANCEL_GRACE_MS = 300
"""How long a superseded job may finish its part in progress before the process is
killed (most parts take tens of milliseconds; a large model's search takes seconds)."""

SHUTDOWN_WAIT_MS = 5_000
"""How long closing the window waits for a killed process to end."""

STDERR_KEPT = 2_000
"""Characters of the process's stderr kept for the message when it dies."""

Command = Callable[[], list[str]]
"""The argument vector of the worker process (program first)."""


SERVER_ENV = "MEMPLAN_ANALYSIS_SERVER"
"""Set (to 1) for the worker process: a frozen bundle's executable, which has no ``-m``,
runs the server instead of the app when it sees it (``packaging/memplan_entry.py``)."""


def server_command() -> list[str]:
    """``python -m gui.workers.analysis_server`` in this interpreter (the window's environment);
    in a frozen bundle its own executable, told by :data:`SERVER_ENV`."""
    if getattr(sys, "frozen", False):
        return [sys.executable]
    return [sys.executable, "-m", "gui.workers.analysis_server"]


def server_environment() -> QProcessEnvironment:
    """The window's environment for the server (:func:`child_environment`)."""
    return child_environment(SERVER_ENV)


def _kept(plan: Plan, name: Part) -> object:
    """A part the window's analysis of ``plan`` already holds (its PlanError as a value)."""
    try:
        return analysis(plan).get(name)
    except PlanError as exc:
        return exc


class AnalysisWorker(QObject):
    """One job at a time in one child process; re-emits its parts on the GUI thread."""

    partReady = Signal(str, str, object)  # config hash, part name, value or PlanError
    failed = Signal(str)  # the process stopped on its own: why, in a sentence
    totalReady = Signal(str, object)  # preset key, its exact parameter count (an int)

    def __init__(self, parent: QObject | None = None, command: Command = server_command) -> None:
        super().__init__(parent)
        self.command = command
        self._proc: QProcess | None = None
        self._buffer = bytearray()
        self._stderr = ""
        self.pid = 0  # the process's id once it said it is ready
        self._next_id = 0
        self._wanted = 0  # the job whose parts are emitted (0: none)
        self._plans: dict[int, Plan] = {}  # jobs sent and not done
        self._wanted_parts: tuple[Part, ...] = WINDOW_PARTS
        self._totals: dict[str, None] = {}  # preset keys asked and not answered, in order
        self.totals: dict[str, int] = {}  # preset key → its parameter count, as answered
        self._grace = QTimer(self)
        self._grace.setSingleShot(True)
        self._grace.setInterval(CANCEL_GRACE_MS)
        self._grace.timeout.connect(self._stop_stale)

    @property
    def busy(self) -> bool:
        """Whether a job is being computed (the wanted one or one being abandoned)."""
        return bool(self._plans)

    def submit(self, plan: Plan, parts: tuple[Part, ...] = WINDOW_PARTS) -> int:
        """Compute ``plan``'s parts; jobs for earlier plans are abandoned. Parts the
        window already holds for that plan are emitted at once. Returns the job id."""
        self.cancel()
        a = analysis(plan)
        for name in [p for p in parts if a.computed(p)]:
            self.partReady.emit(a.config_hash, name, _kept(plan, name))
        missing = tuple(p for p in parts if not a.computed(p))
        if not missing:
            return 0
        self._next_id += 1
        self._wanted = self._next_id
        self._plans[self._wanted] = plan
        self._wanted_parts = parts
        self._send(self._wanted, plan, missing)
        return self._wanted

    def cancel(self) -> None:
        """No part of the current job is wanted any more; the process abandons it before
        its next part, or is killed if it is still busy after the grace time."""
        self._wanted = 0
        if self._plans and not self._grace.isActive():
            self._grace.start()

    def request_totals(self, keys: Iterable[str]) -> None:
        """Count these presets' parameters in the worker process while it has no job;
        each count arrives by :attr:`totalReady` (once: a count already answered or
        asked is not asked again). Starts the process if none runs."""
        new = [k for k in keys if k not in self._totals and k not in self.totals]
        self._totals.update(dict.fromkeys(new))
        if not new:
            return
        if self._proc is None:
            self._process()  # a new process is sent every count still wanted
        else:
            self._proc.write(encode((TOTALS, tuple(new))))

    # the process ---------------------------------------------------------------
    def _process(self) -> QProcess:
        if self._proc is None:
            proc = QProcess(self)
            proc.setProcessEnvironment(server_environment())
            proc.readyReadStandardOutput.connect(self._read)
            proc.readyReadStandardError.connect(self._read_stderr)
            proc.finished.connect(self._finished)
            proc.errorOccurred.connect(self._error)
            self._buffer, self._stderr, self.pid = bytearray(), "", 0
            program, *args = self.command()
            proc.start(program, args)
            self._proc = proc
            if self._totals:
                proc.write(encode((TOTALS, tuple(self._totals))))
        return self._proc

    def _send(self, job: int, plan: Plan, parts: tuple[Part, ...]) -> None:
        self._process().write(encode((job, plan, parts)))

    def _read(self) -> None:
        if self._proc is None:
            return
        self._buffer += bytes(self._proc.readAllStandardOutput().data())
        for message in decode(self._buffer):
            self._handle(message)

    def _handle(self, message: object) -> None:
        if not isinstance(message, tuple):
            return
        if message[0] == "ready":
            self.pid = int(message[1])
            return
        if message[0] == "total":
            _, key, total = message
            self._totals.pop(key, None)
            self.totals[key] = total
            self.totalReady.emit(key, total)
            return
        job, key, name, value = message
        if name is None:  # the job is done (or abandoned)
            self._plans.pop(job, None)
            if not any(j != self._wanted for j in self._plans):
                self._grace.stop()
            return
        plan = self._plans.get(job)
        if plan is not None:
            analysis(plan).provide(name, value)
        if job == self._wanted:
            self.partReady.emit(key, name, value)

    def _read_stderr(self) -> None:
        if self._proc is not None:
            text = bytes(self._proc.readAllStandardError().data()).decode(errors="replace")
            self._stderr = (self._stderr + text)[-STDERR_KEPT:]

    def _stop_stale(self) -> None:
        """A superseded job still runs: kill the process, give the wanted job to a new one."""
        if not any(j != self._wanted for j in self._plans):
            return
        self._discard_process()
        wanted = self._plans.get(self._wanted)
        self._plans.clear()
        a = None if wanted is None else analysis(wanted)
        missing = tuple(p for p in self._wanted_parts if a is not None and not a.computed(p))
        if wanted is not None and missing:
            self._plans[self._wanted] = wanted
            self._send(self._wanted, wanted, missing)

    def _discard_process(self) -> None:
        """Kill the process without reporting it (we stopped it)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            discard(proc, SHUTDOWN_WAIT_MS)

    def _finished(self, code: int, status: QProcess.ExitStatus) -> None:
        if status == QProcess.ExitStatus.CrashExit:
            self._died("the analysis process crashed")
        else:
            self._died(f"the analysis process exited with code {code}")

    def _error(self, error: QProcess.ProcessError) -> None:
        if error == QProcess.ProcessError.FailedToStart:
            self._died("the analysis process could not start")

    def _died(self, what: str) -> None:
        """The process stopped on its own: drop its jobs and say why."""
        if self._proc is None:
            return
        self._read()
        self._read_stderr()
        proc, self._proc = self._proc, None
        proc.deleteLater()
        lost = bool(self._plans)
        self._plans.clear()
        self._grace.stop()
        if lost or self._wanted:
            tail = self._stderr.strip().splitlines()
            reason = f"{what}: {tail[-1]}" if tail else what
            self._wanted = 0
            self.failed.emit(reason)

    def shutdown(self, wait_ms: int = SHUTDOWN_WAIT_MS) -> bool:
        """Stop the process (its results go nowhere); True when it has ended."""
        self._wanted = 0
        self._plans.clear()
        self._grace.stop()
        proc, self._proc = self._proc, None
        if proc is None:
            return True
        for signal in (proc.finished, proc.errorOccurred):
            signal.disconnect()
        proc.closeWriteChannel()  # the server ends at the end of its stdin
        if not proc.waitForFinished(min(wait_ms, CANCEL_GRACE_MS)):
            proc.kill()
            proc.waitForFinished(wait_ms)
        ended = proc.state() == QProcess.ProcessState.NotRunning
        proc.deleteLater()
        return ended
