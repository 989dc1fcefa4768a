"""Window sizes that fit the screen the window is on (a 1366×768 laptop included).

The main window prefers 1280×800, which is taller than a 768-px laptop screen; a saved
geometry can come from a larger monitor. Both are clamped to the *available* geometry
(the screen less its panels and docks) of the screen the window is on, so the window
never opens with its title bar or its bottom row off screen.
"""

from __future__ import annotations

from PySide6.QtCore import QRect, QSize
from PySide6.QtGui import QGuiApplication, QScreen
from PySide6.QtWidgets import QWidget

PREFERRED_SIZE = QSize(1280, 800)
"""The least the window asks for on a screen that has room for it."""

SCREEN_SHARE = 0.9
"""On a larger screen the window opens at this share of the available area."""

FRAME_ALLOWANCE = QSize(16, 40)
"""Room left for the window manager's frame and title bar (not part of the geometry)."""


def screen_of(widget: QWidget) -> QScreen | None:
    """The screen the widget is on, else the one under the cursor, else the primary."""
    return widget.screen() or QGuiApplication.primaryScreen()


def fitted(size: QSize, available: QRect) -> QSize:
    """``size`` shrunk to fit ``available`` with the frame allowance."""
    room = available.size() - FRAME_ALLOWANCE
    return QSize(max(1, min(size.width(), room.width())), max(1, min(size.height(), room.height())))


def fit_window(widget: QWidget, preferred: QSize = PREFERRED_SIZE) -> None:
    """Resize ``widget`` to ``preferred`` within its screen, and keep it on the screen."""
    screen = screen_of(widget)
    if screen is None:
        widget.resize(preferred)
        return
    avail = screen.availableGeometry()
    wanted = QSize(
        max(preferred.width(), int(avail.width() * SCREEN_SHARE)),
        max(preferred.height(), int(avail.height() * SCREEN_SHARE)),
    )
    size = fitted(wanted, avail)
    widget.resize(size)
    widget.move(
        avail.left() + max(0, (avail.width() - size.width()) // 2),
        avail.top() + max(0, (avail.height() - size.height() - FRAME_ALLOWANCE.height()) // 2),
    )


def clamp_to_screen(widget: QWidget) -> None:
    """After a saved geometry was restored: shrink and move it onto the current screen."""
    screen = screen_of(widget)
    if screen is None:
        return
    avail = screen.availableGeometry()
    size = fitted(widget.size(), avail)
    if size != widget.size():
        widget.resize(size)
    pos = widget.pos()
    x = min(max(pos.x(), avail.left()), avail.right() - size.width() + 1)
    y = min(max(pos.y(), avail.top()), avail.bottom() - size.height() + 1)
    if (x, y) != (pos.x(), pos.y()):
        widget.move(x, y)
