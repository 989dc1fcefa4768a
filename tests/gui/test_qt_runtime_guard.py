"""Guards on the Qt runtime itself (see shared/reference/qt-stack.md)."""

from __future__ import annotations

import sys

import pytest

QtGui = pytest.importorskip("PySide6.QtGui")


def test_void_methods_do_not_leak_none_references(qapp: object) -> None:
    """PySide6 6.12.0 on CPython 3.11 decrements None's refcount on every void call,
    which aborts the interpreter at exit; 1000 calls must leave the count unchanged."""
    font = QtGui.QFont()
    before = sys.getrefcount(None)
    for _ in range(1000):
        font.setPointSize(10)
    assert sys.getrefcount(None) >= before - 10


def test_fonts_are_installed(qapp: object) -> None:
    """Without any font every glyph renders as a box and Qt prints no warning."""
    assert QtGui.QFontDatabase.families()
