"""The main window's toolbar: New, Open, Save, Undo, Redo and the units chooser.

Undo and Redo appear as twins of the Edit menu's actions (:func:`toolbar_twin`): the
menu's texts name the step ("Undo Set sequence length to 4096") and change on every
edit, and a tool button whose action's text changes lays the window out again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QComboBox, QLabel, QMainWindow, QToolBar

from gui.history_actions import toolbar_twin


def main_toolbar(
    window: QMainWindow,
    files: tuple[QAction, ...],
    history: tuple[QAction, QAction],
    units: Mapping[str, str],
    current: str,
    choose: Callable[[str], None],
) -> QComboBox:
    """Add the toolbar to ``window``; returns its units chooser (``choose`` is called
    with the key of the units picked)."""
    bar = QToolBar("Main", window)
    bar.setObjectName("mainToolbar")
    bar.setMovable(False)
    bar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
    for action in (*files, *(toolbar_twin(a, window) for a in history)):
        bar.addAction(action)
    bar.addSeparator()
    bar.addWidget(QLabel(" Units ", bar))
    combo = QComboBox(bar)
    combo.setObjectName("unitCombo")
    for key, text in units.items():
        combo.addItem(text, key)
    combo.setCurrentIndex(combo.findData(current))
    combo.activated.connect(lambda i: choose(combo.itemData(i)))
    bar.addWidget(combo)
    window.addToolBar(bar)
    return combo
