"""The QApplication and ``main(path)``: what the ``memplan`` command starts.

Uses the Fusion style with the system's colour scheme (light or dark), so the app looks
the same on every desktop and follows the system when the scheme changes.
"""

from __future__ import annotations

import sys

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication

from engine.fileio.atomic import clean_stale_temps
from gui.files import autosave, recovery
from gui.main_window import MainWindow
from gui.settings import Settings, autosave_dir

APP_NAME = "MemPlan"


def make_app(argv: list[str] | None = None) -> QApplication:
    """The application object (reused when one exists, as under pytest-qt)."""
    existing = QApplication.instance()
    if isinstance(existing, QApplication):
        return existing
    QGuiApplication.setHighDpiScaleFactorRoundingPolicy(
        Qt.HighDpiScaleFactorRoundingPolicy.PassThrough
    )
    app = QApplication(argv if argv is not None else sys.argv[:1])
    app.setApplicationName(APP_NAME)
    app.setOrganizationName(APP_NAME)
    app.setStyle("Fusion")
    return app


_windows: list[MainWindow] = []
"""Every window this instance opened (recovery may open several); kept so none is
garbage-collected while shown."""


def new_window(settings: Settings | None = None) -> MainWindow:
    """A shown main window whose autosave failures appear in its status bar."""
    window = MainWindow(settings or Settings())
    window.autosaver.failed.connect(
        lambda message: window.statusBar().showMessage(f"Autosave failed: {message}")
    )
    _windows.append(window)
    window.show()
    return window


def offer_recovery(window: MainWindow) -> bool:
    """Offer every crashed instance's autosaves (see :mod:`gui.files.recovery`)."""
    return recovery.offer_recovery(window, new_window)


def start(path: str | None = None) -> MainWindow:
    """Everything ``main`` does before the event loop: a window, recovery, then the file
    from the command line (in a window of its own if recovery filled the first). A bad
    file shows its error in a dialog over the window; the app keeps running."""
    make_app()
    clean_stale_temps(autosave_dir())
    window = new_window()
    recovered = offer_recovery(window)
    if path:
        target = new_window() if recovered and not recovery.is_pristine(window) else window
        target.open_initial(path)
    return window


def main(path: str | None = None) -> int:
    """Open the main window on ``path`` (or the default plan) and run the event loop."""
    app = make_app()
    start(path)
    app.aboutToQuit.connect(autosave.release_instances)
    return app.exec()
