"""Test configuration shared by the engine and GUI suites."""

from __future__ import annotations

import os

# Qt aborts without a display; tests always render offscreen (qt-stack.md).
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
