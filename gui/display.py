"""Whether Qt can show a window here: asked by the console script before it starts the
app, and by ``memplan report`` to fall back to offscreen rendering. Kept apart (and free
of Qt) so neither has to import the other."""

from __future__ import annotations

import os
import sys


def has_display() -> bool:
    """Whether Qt can open a window here (or was told to render offscreen)."""
    if os.environ.get("QT_QPA_PLATFORM"):
        return True
    if sys.platform in ("win32", "darwin"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
