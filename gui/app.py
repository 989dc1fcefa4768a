"""The QApplication and ``main(path)``: what the ``memplan`` command starts.

Uses the Fusion style with the system's colour scheme (light or dark), so the app looks
the same on every desktop and follows the system when the scheme changes.
"""

from __future__ import annotations

import sys

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication

from engine import planfile
from gui import autosave, dialogs
from gui.main_window import MainWindow
from gui.settings import Settings

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
    pg.setConfigOptions(antialias=True)
    return app


def offer_recovery(window: MainWindow) -> bool:
    """Offer the newest autosave a crashed session left; True if it was recovered."""
    orphans = autosave.find_orphans()
    if not orphans:
        return False
    newest, *older = orphans
    for orphan in older:
        autosave.discard(orphan)
    recovered = False
    if dialogs.ask_recover(window, newest.original, newest.saved_at):
        try:
            window.doc.recover(newest.plan_path, newest.original)
            recovered = True
        except planfile.PlanFileError as exc:
            dialogs.show_error(window, "Cannot recover", str(exc))
    autosave.discard(newest)
    return recovered


def main(path: str | None = None) -> int:
    """Open the main window on ``path`` (or the default plan) and run the event loop."""
    app = make_app()
    window = MainWindow(Settings())
    window.show()
    if not offer_recovery(window):
        window.open_initial(path)
    return app.exec()
