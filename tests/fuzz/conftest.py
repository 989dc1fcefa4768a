"""The fuzz tests use the GUI suite's fixtures: settings and autosaves in a temporary
folder (autouse), a shown main window, the pid of a process that has exited."""

from __future__ import annotations

from tests.gui.conftest import dead_pid, isolated_dirs, window

__all__ = ["dead_pid", "isolated_dirs", "window"]
