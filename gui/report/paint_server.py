"""The report painter process: lays out and paints one report into a PDF, then ends.

The window's export (:mod:`gui.report.export_job`) runs the report's text layout and
page painting here, in a child process, never on a thread of its own: see
:mod:`gui.report.paint_process` for why. The window starts it when the export starts,
so its start (Python, Qt, the report's modules: about half a second) overlaps the
gathering of the figures; it then waits for its job. The parent sends one pickle on
stdin — a dict
of plain data, :data:`JOB_KEYS`: the gathered :class:`~gui.report.content.ReportContent`
(engine dataclasses, no Qt object and no code), its HTML (made with it, where the
engine's caches are warm), the page size and the window's application font as
``QFont.toString()`` — and closes it. The server writes the PDF
to the path given as its one argument (the parent's temporary file next to the
target; the parent moves it into place, or removes it), and says on stdout:

* ``page I N`` after each of the N pages is painted (the parent's progress bar);
* ``done N`` once the file is complete and closed.

A stdin closed without a job (the export was cancelled or failed before it was
sent) ends the server quietly. A painter whose parent is gone (the window crashed or
was killed) stops after the page in progress and removes its file: nothing
half-written outlives the window.

A failure is one line on stderr, ``memplan: <Type>: <message>`` (what the window's
export error dialog shows), and exit code 1. The pickle comes from the window of the
same installation, over a pipe only it holds, so it is trusted as the analysis server's
is (:mod:`gui.workers.analysis_server`).

Run as ``python -m gui.report.paint_server PATH``; in a frozen bundle the bundle's own
executable with :data:`PAINTER_ENV` set (``packaging/memplan_entry.py``).
"""

from __future__ import annotations

import os
import pickle
import sys
from contextlib import suppress
from pathlib import Path
from typing import Any, TextIO

PAINTER_ENV = "MEMPLAN_REPORT_PAINTER"
"""Set (to 1) for the painter process: a frozen bundle runs this server when it sees it."""

JOB_KEYS = ("content", "html", "page", "font")
"""What the parent's pickle holds (see the module docstring)."""

EXIT_FAILED = 1


def run(job: dict[str, Any], path: str, out: TextIO) -> int:
    """Paint ``job`` into ``path``, telling ``out`` each page; returns the page count.
    Needs the Qt application (:func:`main` makes it)."""
    from PySide6.QtGui import QFont, QGuiApplication

    from gui.report.pdf import ReportCancelled, write_pdf

    parent = os.getppid()
    font = QFont()
    if job.get("font") and font.fromString(str(job["font"])):
        # the charts take their labels' family from the application font: the window's
        QGuiApplication.setFont(font)

    def say(line: str) -> bool:
        """Tell the window; False when it is gone (a closed pipe, a new parent)."""
        try:
            out.write(line + "\n")
            out.flush()
        except OSError:
            return False
        return os.getppid() == parent

    try:
        pages = write_pdf(
            job["content"],
            path,
            job["page"],
            progress=lambda i, n: say(f"page {i} {n}"),
            html=str(job["html"]),
        )
        if not say(f"done {pages}"):
            raise ReportCancelled("nobody to hand the report to")
    except ReportCancelled:
        Path(path).unlink(missing_ok=True)
        raise OSError("the window that asked for the report has closed") from None
    except BaseException:
        Path(path).unlink(missing_ok=True)
        raise
    return pages


def main(argv: list[str] | None = None) -> int:
    """Read the job from stdin, paint it to ``argv[0]``; see the module docstring."""
    args = sys.argv[1:] if argv is None else argv
    out = sys.stdout
    sys.stdout = sys.stderr  # stray prints stay off the progress pipe
    try:
        if len(args) != 1:
            raise ValueError("usage: python -m gui.report.paint_server PATH (job on stdin)")
        os.environ["QT_QPA_PLATFORM"] = "offscreen"  # it shows nothing, display or not
        from PySide6.QtGui import QGuiApplication

        import gui.report.pdf  # noqa: F401  (loaded while the window gathers the figures)

        app = QGuiApplication.instance() or QGuiApplication([sys.argv[0] or "memplan"])
        try:
            job = pickle.load(sys.stdin.buffer)
        except EOFError:  # the window no longer wants a report: nothing to do
            return 0
        if not isinstance(job, dict) or set(job) != set(JOB_KEYS):
            raise ValueError("the report job is not a painter job")
        run(job, args[0], out)
        del app
    except Exception as exc:  # said to the parent in one line, as the window shows it
        with suppress(OSError):  # unless nobody is listening any more
            print(f"memplan: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return EXIT_FAILED
    return 0


if __name__ == "__main__":
    from gui.workers.one_shot import end_process

    end_process(main())  # the PDF is closed: the interpreter's teardown buys nothing
