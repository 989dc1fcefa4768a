"""The Measured-runs view and the framework export/import code are imported on first
use, not at the window's start; their menu entries are there from the start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import sys
from gui.app import make_app
app = make_app()
from gui.main_window import MainWindow
from gui.settings import Settings
w = MainWindow(Settings(), autosave_ms=3_600_000)
w.show()
app.processEvents()
texts = [a.text() for a in w.menuBar().actions()]
print('gui.trace.measured' in sys.modules, 'gui.frameworks.framework_actions' in sys.modules,
      '&Measured runs' in texts, w.framework.import_action.text(),
      len(w.framework.export_menu.actions()), w.attach_action.text())
w.doc.undo_stack.setClean()
w.close()
from shiboken6 import delete
delete(w)
"""


def test_a_started_window_has_not_imported_them(isolated_dirs: Path) -> None:
    got = subprocess.run(
        [sys.executable, "-c", CHILD],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
    )
    line = got.stdout.strip().splitlines()[-1]
    assert line == "False False True &Import Framework Config… 4 &Attach records…"


def test_the_measured_view_is_built_when_its_tab_is_shown(qtbot: Any, window: Any) -> None:
    assert not window.measured.built
    window.results.setCurrentWidget(window.measured)
    qtbot.waitUntil(lambda: window.measured.built)
    assert "No measured runs" in window.measured.view.toPlainText()


def test_an_export_entry_loads_the_exports_and_opens_the_save_dialog(
    qtbot: Any, window: Any, monkeypatch: Any
) -> None:
    from PySide6.QtWidgets import QFileDialog

    asked: list[str] = []

    def dialog(*a: Any, **kw: Any) -> tuple[str, str]:
        # the export passes options=DontConfirmOverwrite: export_to asks once, naming
        # every file it would replace (gui/frameworks/framework_actions.py export_dialog)
        asked.append(a[2])
        return "", ""

    monkeypatch.setattr(QFileDialog, "getSaveFileName", dialog)
    window.framework.exports["deepspeed"].trigger()
    assert asked and asked[0].endswith(".json")
