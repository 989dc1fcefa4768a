"""Run ``memplan trace`` for the window in a worker process, with progress and Cancel.

A process, not a thread: a torch run cannot be interrupted from another thread, and
killing the process is the only sure way to stop it (and to get its memory back).
:class:`TraceProcess` writes the document's plan file to a temporary folder, runs
``python -m engine.cli trace PLAN --json`` under :class:`QProcess` (its output arrives
through the event loop, so the window never waits on it), turns the stderr lines into
progress (:mod:`engine.trace.progress`), and hands back the trace record the command
printed, or the one-line reason it gave. Only one trace runs at a time.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, QProcess, Signal

from engine.planfile import PlanFile, save
from engine.trace.progress import parse_line
from engine.validation.records import MeasuredRecord, RecordError, parse_record

Command = Callable[[Path, int], list[str]]
"""(plan file, steps) → the argument vector of the trace process (program first)."""

STEPS = 2
"""Training steps a window trace runs (the CLI's default): the first creates the
optimizer state, the second is the steady step that is reported."""

KILL_WAIT_MS = 5_000
"""How long Cancel (or closing the window) waits for the killed process to end."""


def cli_command(plan: Path, steps: int) -> list[str]:
    """``memplan trace`` in this interpreter: the same environment as the window."""
    return [sys.executable, "-m", "engine.cli", "trace", str(plan), "--json", "--steps", str(steps)]


def _reason(stderr: str, code: int) -> str:
    """The trace's own one-line reason (``memplan: …``), else the last stderr line."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    said = [ln.removeprefix("memplan: ") for ln in lines if ln.startswith("memplan: ")]
    if said:
        return said[-1]
    tail = lines[-1] if lines else "no output"
    return f"the trace process exited with code {code}: {tail}"


class TraceProcess(QObject):
    """One trace at a time in a child process; results arrive as signals."""

    progress = Signal(int, int, str)  # milestones done, total, the message with seconds
    finished = Signal(object)  # the MeasuredRecord the trace produced
    failed = Signal(str)  # why there is no record (refused, failed, crashed)
    cancelled = Signal()

    def __init__(self, parent: QObject | None = None, command: Command = cli_command) -> None:
        super().__init__(parent)
        self.command = command
        self._proc: QProcess | None = None
        self._tmp: Path | None = None
        self._stderr = ""
        self._partial = ""
        self._cancelling = False
        self._steps = STEPS
        self.plan_hash = ""  # config hash of the plan being traced

    @property
    def running(self) -> bool:
        return self._proc is not None

    def start(self, pf: PlanFile, steps: int = STEPS) -> None:
        """Trace ``pf``'s plan (a copy on disk, so later edits do not reach it)."""
        if self.running:
            raise RuntimeError("a trace is already running")
        self._tmp = Path(tempfile.mkdtemp(prefix="memplan-trace-"))
        path = self._tmp / "plan.memplan"
        save(pf, path)
        self.plan_hash = pf.plan.config_hash()
        self._stderr, self._partial, self._cancelling, self._steps = "", "", False, steps
        proc = QProcess(self)
        proc.readyReadStandardError.connect(self._read_stderr)
        proc.finished.connect(self._finished)
        proc.errorOccurred.connect(self._error)
        argv = self.command(path, steps)
        self._proc = proc
        proc.start(argv[0], argv[1:])

    def cancel(self) -> None:
        """Kill the trace; ``cancelled`` follows when the process has ended."""
        if self._proc is None:
            return
        self._cancelling = True
        self._proc.kill()

    def shutdown(self) -> None:
        """Kill a running trace and wait for it (closing the window)."""
        proc = self._proc
        if proc is not None:
            self._cancelling = True
            proc.kill()
            proc.waitForFinished(KILL_WAIT_MS)

    def _read_stderr(self) -> None:
        if self._proc is None:
            return
        text = self._partial + bytes(self._proc.readAllStandardError().data()).decode(
            "utf-8", "replace"
        )
        *lines, self._partial = text.split("\n")
        for line in lines:
            self._stderr += line + "\n"
            got = parse_line(line, self._steps)
            if got is not None:
                self.progress.emit(got.done, got.total, line.strip())

    def _error(self, error: QProcess.ProcessError) -> None:
        if error == QProcess.ProcessError.FailedToStart and self._proc is not None:
            message = self._proc.errorString()
            self._cleanup()
            self.failed.emit(f"the trace process could not start: {message}")

    def _finished(self, code: int, status: QProcess.ExitStatus) -> None:
        proc = self._proc
        if proc is None:
            return
        self._read_stderr()
        stdout = bytes(proc.readAllStandardOutput().data()).decode("utf-8", "replace")
        stderr = self._stderr + self._partial
        cancelling = self._cancelling
        self._cleanup()
        if cancelling:
            self.cancelled.emit()
        elif status == QProcess.ExitStatus.CrashExit:
            self.failed.emit(f"the trace process crashed: {_reason(stderr, code)}")
        elif code != 0:
            self.failed.emit(_reason(stderr, code))
        else:
            self._deliver(stdout)

    def _deliver(self, stdout: str) -> None:
        try:
            record: MeasuredRecord = parse_record(json.loads(stdout)["record"], "trace output")
        except (json.JSONDecodeError, KeyError, TypeError, RecordError) as exc:
            self.failed.emit(f"the trace printed no readable record: {exc}")
            return
        self.finished.emit(record)

    def _cleanup(self) -> None:
        if self._proc is not None:
            self._proc.deleteLater()
        self._proc = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
