"""Step 2 of the window's export — the report's layout and pages — in a child process.

Why a process and not a thread: QTextDocument and its layout connect signals as they
are made (``QAbstractTextDocumentLayout::registerHandler``, the document's own
connections), and a connection takes one of Qt's small pool of connection mutexes. On
a Python worker thread that happens with the GIL held. The GUI thread, meanwhile, may
hold such a mutex and wait for the GIL: ``QObject::disconnect`` calls the virtual
``disconnectNotify``, and PySide looks for a Python override of it under the GIL. When
the two objects hash onto the same mutex, each thread holds what the other waits for,
and the window freezes for good (seen in CI: a py-spy dump of
``test_window_export_includes_what_was_asked``, one run in five). No care on the worker's
side can rule it out — any Qt call that connects, disconnects or deletes a QObject is
exposed — so this module puts every QTextDocument, layout, QPicture and QPdfWriter of a
written report in another process, whose interpreter the GUI thread never waits for.

The other ways were weighed: laying out on the GUI thread in slices would keep the
window a second or more per report busy in slices of a flow (a long table is one
slice), and the analysis worker's process (:mod:`gui.workers.analysis_server`) is
engine-only by design (no Qt, started at every plan). A short-lived process per export
costs its start (Qt and the report modules: about half a second, while the progress
bar shows "Computing the report's figures…": the window starts it with the export,
:meth:`PdfPainter.prepare`) and gives Cancel for free: the process is killed.

What crosses over is data only (:mod:`gui.report.paint_server`): the gathered
:class:`~gui.report.content.ReportContent` and its HTML, the page size and the window's
application font, pickled onto the child's stdin (no file to leave behind or be
swapped). The ledger and stage charts, once recorded on the GUI thread, are recorded in
the child from the same content with the window's font: the same drawings. The child writes a
temporary file next to the target (``.NAME.part-PID``); this object moves it into place
when the child says ``done`` and exits 0, and removes it on Cancel, failure or a crash,
so no half-written PDF is ever left.
"""

from __future__ import annotations

import os
import pickle
import sys
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, QProcess, QProcessEnvironment, Signal
from PySide6.QtGui import QGuiApplication

from engine.fileio.atomic import refuse_special
from gui.report.content import ReportContent
from gui.report.paint_server import PAINTER_ENV
from gui.workers.analysis_worker import SERVER_ENV
from gui.workers.child_process import child_environment, discard

KILL_WAIT_MS = 5_000
"""How long Cancel (or closing the window) waits for the killed process to end."""

Command = Callable[[str], list[str]]
"""(temporary PDF path) → the argument vector of the painter process (program first)."""


def painter_command(path: str) -> list[str]:
    """``python -m gui.report.paint_server PATH`` in this interpreter; in a frozen
    bundle its own executable, told by :data:`PAINTER_ENV`."""
    if getattr(sys, "frozen", False):
        return [sys.executable, path]
    return [sys.executable, "-m", "gui.report.paint_server", path]


def painter_environment() -> QProcessEnvironment:
    """The window's environment for the painter (:func:`child_environment`, never with
    the analysis server's flag), with offscreen Qt."""
    env = child_environment(PAINTER_ENV, unset=(SERVER_ENV,))
    env.insert("QT_QPA_PLATFORM", "offscreen")
    return env


def temp_path(target: Path) -> Path:
    """Where the child writes: next to ``target`` (so the move is a rename), hidden."""
    return target.with_name(f".{target.name}.part-{os.getpid()}")


def reason(stderr: str, code: int, crashed: bool) -> str:
    """The painter's own one-line reason (``memplan: …``), else what happened to it."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    said = [ln.removeprefix("memplan: ") for ln in lines if ln.startswith("memplan: ")]
    if said and not crashed:
        return said[-1]
    what = "crashed" if crashed else f"exited with code {code}"
    return f"the report process {what}" + (f": {lines[-1]}" if lines else "")


class PdfPainter(QObject):
    """One report painted into a PDF by a child process; signals arrive on the GUI
    thread. At most one runs per object."""

    progress = Signal(int, int)  # pages painted, pages
    written = Signal(int)  # pages; the PDF is in place
    failed = Signal(str)  # why there is no PDF (nothing was left behind)
    cancelled = Signal()

    def __init__(self, parent: QObject | None = None, command: Command = painter_command):
        super().__init__(parent)
        self.command = command
        self._proc: QProcess | None = None
        self._target: Path | None = None
        self._temp: Path | None = None
        self._out = ""
        self._stderr = ""
        self._pages = 0  # from the child's "done N"

    @property
    def busy(self) -> bool:
        return self._proc is not None

    def start(self, content: ReportContent, html: str, path: str, page: str) -> None:
        """Paint ``content`` (its HTML made beforehand: ``report_html``) into ``path``:
        :meth:`prepare`, then :meth:`send`."""
        self.prepare(path)
        self.send(content, html, page)

    def prepare(self, path: str) -> None:
        """Start a painter for ``path``, to wait for its job (:meth:`send`) while the
        figures are gathered. Raises OSError (a FIFO or device at ``path``) before
        anything starts; a painter already running is stopped, silently."""
        self.shutdown()
        target = Path(path)
        refuse_special(target)  # the temp file is renamed over it: never over a FIFO
        self._target, self._temp = target, temp_path(target)
        self._out, self._stderr, self._pages = "", "", 0
        proc = QProcess(self)
        proc.setProcessEnvironment(painter_environment())
        proc.readyReadStandardOutput.connect(self._read)
        proc.readyReadStandardError.connect(self._read_stderr)
        proc.finished.connect(self._finished)
        proc.errorOccurred.connect(self._error)
        self._proc = proc
        program, *args = self.command(str(self._temp))
        proc.start(program, args)

    def send(self, content: ReportContent, html: str, page: str) -> None:
        """The prepared painter's job: it paints as soon as it has read it. (A painter
        that has died since was reported by ``failed`` already.)"""
        if self._proc is None:
            return
        font = QGuiApplication.font().toString()
        job = {"content": content, "html": html, "page": page, "font": font}
        self._proc.write(pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL))
        self._proc.closeWriteChannel()  # closed once it is all written

    def cancel(self) -> None:
        """Kill the painter and remove its file; ``cancelled`` is emitted (at once)."""
        if self._proc is None:
            return
        self._stop()
        self.cancelled.emit()

    def shutdown(self) -> None:
        """Closing the window: as Cancel, with nobody told."""
        self._stop()

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        discard(proc, KILL_WAIT_MS)
        self._remove_temp()

    def _remove_temp(self) -> None:
        if self._temp is not None:
            self._temp.unlink(missing_ok=True)
        self._temp = self._target = None

    def _read(self) -> None:
        if self._proc is None:
            return
        text = self._out + bytes(self._proc.readAllStandardOutput().data()).decode(
            "utf-8", "replace"
        )
        *lines, self._out = text.split("\n")
        for line in lines:
            words = line.split()
            if len(words) == 3 and words[0] == "page" and words[1].isdigit():
                self.progress.emit(int(words[1]), int(words[2]))
            elif len(words) == 2 and words[0] == "done" and words[1].isdigit():
                self._pages = int(words[1])

    def _read_stderr(self) -> None:
        if self._proc is not None:
            text = bytes(self._proc.readAllStandardError().data()).decode("utf-8", "replace")
            self._stderr = (self._stderr + text)[-4_000:]

    def _error(self, error: QProcess.ProcessError) -> None:
        if error == QProcess.ProcessError.FailedToStart and self._proc is not None:
            message = self._proc.errorString()
            self._stop()
            self.failed.emit(f"the report process could not start: {message}")

    def _finished(self, code: int, status: QProcess.ExitStatus) -> None:
        if self._proc is None:
            return
        self._read()
        self._read_stderr()
        proc, self._proc = self._proc, None
        proc.deleteLater()
        temp, target, pages = self._temp, self._target, self._pages
        crashed = status == QProcess.ExitStatus.CrashExit
        if crashed or code != 0 or not pages or temp is None or target is None:
            self._remove_temp()
            self.failed.emit(reason(self._stderr, code, crashed))
            return
        try:
            os.replace(temp, target)
        except OSError as exc:
            self._remove_temp()
            self.failed.emit(f"{type(exc).__name__}: {exc}")
            return
        self._temp = self._target = None
        self.written.emit(pages)
