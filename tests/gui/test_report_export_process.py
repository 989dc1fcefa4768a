"""The window's report export paints in a child process (gui/report/paint_process.py).

The design flaw it fixes: the layout ran on a worker thread of the window, where a
QTextDocument connecting its layout's signals could deadlock with the GUI thread (Qt's
connection mutex against the GIL). The first test fails on any export that makes a
QTextDocument or QPdfWriter on another thread of the window's process again. The rest
hold what users had: Cancel and failures leave no file, not even the temporary one, and
a failure's one-line reason reaches the error dialog.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from report_helpers import have_poppler, pdf_info

from gui.report.paint_process import reason, temp_path
from gui.report.paint_server import EXIT_FAILED

ROOT = Path(__file__).resolve().parents[2]


def out_dir(tmp_path: Path) -> Path:
    """A folder of its own for the PDF (the window's state lives in ``tmp_path``)."""
    folder = tmp_path / "out"
    folder.mkdir()
    return folder


def fake_painter(script: str) -> Any:
    """A painter command running ``script`` (``path`` is its temporary PDF) instead."""

    def command(path: str) -> list[str]:
        return [sys.executable, "-c", script, path]

    return command


STALLS = """
import sys, time
sys.stdin.buffer.read()
open(sys.argv[1], "wb").write(b"%PDF-1.4 half a report")
print("page 1 20", flush=True)
time.sleep(60)
"""
"""Writes part of a PDF, reports its first page, then paints on (for a minute)."""

FAILS = """
import sys
sys.stdin.buffer.read()
open(sys.argv[1], "wb").write(b"%PDF-1.4 half a report")
print("page 1 20", flush=True)
print("memplan: OSError: [Errno 28] No space left on device", file=sys.stderr)
sys.exit(1)
"""
"""Writes part of a PDF and fails the way the real server says so (paint_server.main)."""

CRASHES = """
import os, signal, sys
sys.stdin.buffer.read()
open(sys.argv[1], "wb").write(b"%PDF-1.4 half a report")
print("Fatal Python error: Segmentation fault", file=sys.stderr, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.skipif(not have_poppler(), reason="needs poppler-utils")
def test_window_export_makes_no_document_off_the_gui_thread(
    qtbot: Any, window: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every QTextDocument and QPdfWriter made in this process during a window export
    is made on the GUI thread (the old worker-thread layout made ~20 documents on a pool
    thread: the deadlock's precondition). The PDF is still written, with its pages."""
    from PySide6.QtGui import QPdfWriter, QTextDocument

    made: list[tuple[str, str]] = []
    for cls in (QTextDocument, QPdfWriter):
        original = cls.__init__

        def recording(self: Any, *args: Any, _o: Any = original, _n: str = cls.__name__) -> None:
            made.append((_n, threading.current_thread().name))
            _o(self, *args)

        monkeypatch.setattr(cls, "__init__", recording)
    out = out_dir(tmp_path) / "r.pdf"
    actions = window.report_actions
    assert actions.export_to(str(out), "a4")
    qtbot.waitUntil(lambda: actions.last_written is not None, timeout=60_000)
    off_thread = [m for m in made if m[1] != threading.main_thread().name]
    assert off_thread == []
    assert actions.last_written == (str(out), int(pdf_info(out)["Pages"]))
    assert [p.name for p in out.parent.iterdir()] == ["r.pdf"]  # no temp file left


def test_cancel_while_painting_kills_the_painter_and_leaves_no_file(
    qtbot: Any, window: Any, tmp_path: Path
) -> None:
    """Cancel after the first page: the painter process is killed, its half-written
    temporary file is removed, no PDF appears, and the status bar says so."""
    actions = window.report_actions
    job = actions.job
    job.painter.command = fake_painter(STALLS)
    pages: list[tuple[str, int, int]] = []
    job.progress.connect(lambda what, done, total: pages.append((what, done, total)))
    out = out_dir(tmp_path) / "r.pdf"
    assert actions.export_to(str(out), "a4")
    qtbot.waitUntil(lambda: ("Writing pages…", 1, 20) in pages, timeout=60_000)
    proc = job.painter._proc
    assert proc is not None and temp_path(out).exists()  # the painter had begun its file
    with qtbot.waitSignal(job.cancelled, timeout=10_000):
        job.cancel()
    assert job.painter._proc is None and not job.busy
    assert list(out.parent.iterdir()) == []
    assert window.statusBar().currentMessage() == "Report cancelled: nothing was written"
    assert actions.last_written is None


@pytest.mark.parametrize(
    ("script", "message"),
    [
        (FAILS, "OSError: [Errno 28] No space left on device"),
        (CRASHES, "the report process crashed: Fatal Python error: Segmentation fault"),
    ],
)
def test_a_failed_painter_shows_its_reason_and_leaves_no_file(
    qtbot: Any,
    window: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    script: str,
    message: str,
) -> None:
    """A painter that fails (its own ``memplan:`` line) or crashes: the error dialog
    shows why, and neither the PDF nor its temporary file is left."""
    from gui import dialogs

    shown: list[str] = []
    monkeypatch.setattr(dialogs, "show_error", lambda _p, _title, text: shown.append(text))
    job = window.report_actions.job
    job.painter.command = fake_painter(script)
    folder = out_dir(tmp_path)
    assert window.report_actions.export_to(str(folder / "r.pdf"), "a4")
    qtbot.waitUntil(lambda: bool(shown), timeout=60_000)
    assert shown == [message]
    assert list(folder.iterdir()) == [] and not job.busy
    assert window.report_actions.last_written is None


def endless_gather(_pf: Any, _units: Any, _extras: Any, progress: Any) -> object:
    """Step 1 that runs until it is cancelled (a large model's searches)."""
    from gui.report.export_job import CANCELLED

    while progress(0, 1):
        time.sleep(0.01)
    return CANCELLED


def test_the_painter_starts_with_the_export_and_cancel_ends_it(
    qtbot: Any, window: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The painter process is started while the figures are gathered (its start
    overlaps step 1); Cancel then kills it: no process, no file, the status bar says
    the report was cancelled."""
    from gui.report import export_job

    monkeypatch.setattr(export_job, "gather_step", endless_gather)
    actions = window.report_actions
    job = actions.job
    out = out_dir(tmp_path) / "r.pdf"
    assert actions.export_to(str(out), "a4")
    proc = job.painter._proc
    assert proc is not None
    qtbot.waitUntil(lambda: proc.processId() > 0, timeout=10_000)
    pid = proc.processId()
    with qtbot.waitSignal(job.cancelled, timeout=10_000):
        job.cancel()
    assert job.painter._proc is None and not job.busy
    assert _ended(pid)
    assert list(out.parent.iterdir()) == []
    assert window.statusBar().currentMessage() == "Report cancelled: nothing was written"


def test_a_painter_that_dies_while_the_figures_are_gathered_fails_the_export_once(
    qtbot: Any, window: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The painter dies before its job is sent: the export fails with its reason, the
    gathering is stopped, and its (cancelled) result then says nothing more."""
    from gui import dialogs
    from gui.report import export_job

    shown: list[str] = []
    monkeypatch.setattr(dialogs, "show_error", lambda _p, _title, text: shown.append(text))
    monkeypatch.setattr(export_job, "gather_step", endless_gather)
    actions = window.report_actions
    job = actions.job
    job.painter.command = fake_painter("import sys; sys.exit('memplan: ImportError: no Qt')")
    said: list[str] = []
    job.cancelled.connect(lambda: said.append("cancelled"))
    assert actions.export_to(str(out_dir(tmp_path) / "r.pdf"), "a4")
    qtbot.waitUntil(lambda: bool(shown), timeout=60_000)
    assert shown == ["ImportError: no Qt"] and not job.busy
    qtbot.waitUntil(lambda: not job.runner.busy, timeout=10_000)  # the gathering ended
    qtbot.wait(50)
    assert said == [] and not job.busy


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
def test_a_fifo_target_is_refused_before_a_painter_starts(
    qtbot: Any, window: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A named pipe where the PDF should go: the dialog says so (engine.fileio.atomic's
    sentence), no painter process starts, and the pipe is left as it was."""
    import stat

    from gui import dialogs

    shown: list[str] = []
    monkeypatch.setattr(dialogs, "show_error", lambda _p, _title, text: shown.append(text))
    fifo = out_dir(tmp_path) / "r.pdf"
    os.mkfifo(fifo)
    job = window.report_actions.job
    assert window.report_actions.export_to(str(fifo), "a4")
    qtbot.waitUntil(lambda: bool(shown), timeout=60_000)
    assert shown[0].startswith("SaveError: ") and "FIFO" in shown[0]
    assert job.painter._proc is None and not job.busy
    assert [p.name for p in fifo.parent.iterdir()] == ["r.pdf"]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


@pytest.mark.skipif(not have_poppler(), reason="needs poppler-utils")
def test_a_printer_is_still_painted_in_the_window(qtbot: Any, window: Any, tmp_path: Path) -> None:
    """File → Print… paints on the GUI thread (a printer cannot go to another process);
    no painter process starts. A QPrinter writing a PDF stands in for the printer."""
    from PySide6.QtPrintSupport import QPrinter

    from engine.plan import default_plan
    from engine.planfile import PlanFile

    printer = QPrinter(QPrinter.PrinterMode.HighResolution)
    printer.setOutputFormat(QPrinter.OutputFormat.PdfFormat)
    out = out_dir(tmp_path) / "printed.pdf"
    printer.setOutputFileName(str(out))
    job = window.report_actions.job
    with qtbot.waitSignal(job.written, timeout=60_000) as got:
        job.start(PlanFile(plan=default_plan()), "both", {}, None, "a4", printer=printer)
        assert job.painter._proc is None
    assert got.args[0] == "printer" and got.args[1] == int(pdf_info(out)["Pages"])


def test_the_server_refuses_a_job_that_is_not_a_painter_job(tmp_path: Path) -> None:
    """paint_server reads only the dict it is sent (content, html, page, font): anything else
    is one ``memplan:`` line on stderr, exit 1, and no file."""
    out = tmp_path / "r.pdf"
    got = subprocess.run(
        [sys.executable, "-m", "gui.report.paint_server", str(out)],
        input=pickle.dumps({"content": None}),
        capture_output=True,
        cwd=ROOT,
    )
    assert got.returncode == EXIT_FAILED
    said = got.stderr.decode().strip().splitlines()
    assert said[-1] == "memplan: ValueError: the report job is not a painter job"
    assert got.stdout == b"" and not out.exists()


def test_reason_prefers_the_painters_own_line() -> None:
    assert reason("noise\nmemplan: OSError: disk full\n", 1, False) == "OSError: disk full"
    assert reason("", 3, False) == "the report process exited with code 3"
    assert reason("boom\n", 0, True) == "the report process crashed: boom"
    # a crash after the painter's own line is still a crash (the line may be stale)
    assert reason("memplan: x\nboom\n", 9, True) == "the report process crashed: boom"


ORPHANING_PARENT = """
import os, subprocess, sys
child = subprocess.Popen(
    [sys.executable, "-m", "gui.report.paint_server", sys.argv[1]],
    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
)
child.stdin.write(sys.stdin.buffer.read())
child.stdin.close()
print(child.pid, child.stdout.readline().decode().strip(), flush=True)
os._exit(0)  # a window that dies while its report is being painted
"""


def _ended(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return True


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_painter_whose_window_died_removes_its_file(tmp_path: Path) -> None:
    """The real painter, orphaned after its first page: it stops at the next page and
    removes its temporary PDF (nothing half-written outlives a crashed window)."""
    from engine.plan import default_plan
    from engine.planfile import PlanFile
    from gui.report.builder import report_html
    from gui.report.content import gather

    content = gather(PlanFile(plan=default_plan()), levers=False)
    job = {"content": content, "html": report_html(content), "page": "a4", "font": ""}
    temp = tmp_path / ".r.pdf.part-1"
    got = subprocess.run(
        [sys.executable, "-c", ORPHANING_PARENT, str(temp)],
        input=pickle.dumps(job),
        capture_output=True,
        cwd=ROOT,
        timeout=120,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
    )
    pid_text, first = got.stdout.decode().split(" ", 1)
    assert first.startswith("page 1 ")  # it had painted a page into its file
    deadline = time.monotonic() + 60
    while not _ended(int(pid_text)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _ended(int(pid_text))
    assert list(tmp_path.iterdir()) == []
