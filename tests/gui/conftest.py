"""GUI test fixtures: settings and autosaves go to a temporary folder, never $HOME."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("PySide6.QtWidgets")


@pytest.fixture
def dead_pid() -> int:
    """The id of a process that has already exited (what a crashed session leaves)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MEMPLAN_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("MEMPLAN_STATE_DIR", str(tmp_path / "state"))
    return tmp_path


@pytest.fixture
def window(qtbot: Any, isolated_dirs: Path) -> Iterator[Any]:
    from gui.main_window import MainWindow
    from gui.settings import Settings

    win = MainWindow(Settings(), autosave_ms=3_600_000)
    win.show()
    qtbot.waitExposed(win)
    yield win
    win.doc.undo_stack.setClean()  # close without the unsaved-changes prompt
    win.close()
    win.deleteLater()
