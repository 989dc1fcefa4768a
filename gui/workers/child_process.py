"""What the window's child processes share: the environment they start in, and how one
is dropped.

The analysis server (:mod:`gui.workers.analysis_worker`) and the report painter
(:mod:`gui.report.paint_process`) run as ``python -m …`` of this checkout, or in a frozen
bundle as the bundle's own executable told by a flag in its environment which child it
is (``packaging/memplan_entry.py``). Both are stopped the same way when the window no
longer wants them: silently, so that neither their end nor their last output reaches the
object that started them.
"""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import QProcess, QProcessEnvironment


def child_environment(flag: str, unset: tuple[str, ...] = ()) -> QProcessEnvironment:
    """The window's environment with the folder this package came from first on the path
    (a checkout run without installing finds the same code), ``flag`` set to 1 and the
    names in ``unset`` removed (another child's flag: a bundle runs whichever it sees)."""
    env = QProcessEnvironment.systemEnvironment()
    root = str(Path(__file__).resolve().parents[2])  # above gui/workers/
    path = env.value("PYTHONPATH", "")
    env.insert("PYTHONPATH", root + (os.pathsep + path if path else ""))
    for name in unset:
        env.remove(name)
    env.insert(flag, "1")
    return env


def discard(proc: QProcess, wait_ms: int) -> None:
    """Kill ``proc`` unheard: its signals are disconnected first, then it is killed,
    awaited for up to ``wait_ms`` and deleted with the event loop."""
    for signal in (
        proc.finished,
        proc.errorOccurred,
        proc.readyReadStandardOutput,
        proc.readyReadStandardError,
    ):
        signal.disconnect()
    proc.kill()
    proc.waitForFinished(wait_ms)
    proc.deleteLater()
