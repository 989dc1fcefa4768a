"""The window on a 1366×768 laptop (1366×740 left by the desktop's panel): every input
and button of every tab can be reached by scrolling and none is cut sideways; the tab
labels are whole; the input panel can be widened; every tab has a keyboard route."""

from __future__ import annotations

from typing import Any

import pytest
from PySide6.QtCore import QPoint, QRect, QSize
from PySide6.QtWidgets import (
    QAbstractButton,
    QApplication,
    QComboBox,
    QLineEdit,
    QScrollArea,
    QWidget,
)

from gui.screen_fit import fitted
from gui.tabs.base import Collapsible

LAPTOP = QSize(1366, 740)
CONTROLS = (QLineEdit, QComboBox, QAbstractButton)


def _controls(page: QScrollArea) -> list[QWidget]:
    inner = page.widget()
    return [
        w
        for w in inner.findChildren(QWidget)
        if isinstance(w, CONTROLS) and w.isVisibleTo(inner) and not w.isWindow()
    ]


def _at_laptop_size(qtbot: Any, window: Any) -> None:
    window.resize(LAPTOP)
    window._open_splitter()  # the opening width of the input panel at this size
    qtbot.waitUntil(lambda: window.size() == LAPTOP)
    QApplication.processEvents()


def test_every_control_of_every_tab_is_reachable_and_not_cut(qtbot: Any, window: Any) -> None:
    """For each input tab: the page's contents are at least as wide as they need (the
    layout never squeezes a field below its minimum) and fit the viewport sideways; each
    control lies inside the contents, is no taller than the viewport, and after
    scrolling to it (the vertical bar set to its top, as far as the bar goes) lies
    wholly inside the visible area."""
    _at_laptop_size(qtbot, window)
    checked = 0
    for index, page in enumerate(window.tabs.values()):
        window.inputs.setCurrentIndex(index)
        for fold in page.widget().findChildren(Collapsible):
            fold.button.setChecked(True)  # the advanced knobs too
        QApplication.processEvents()
        inner, view = page.widget(), page.viewport()
        assert inner.width() >= inner.minimumSizeHint().width(), type(page).__name__
        assert inner.width() <= view.width(), f"{type(page).__name__} needs side scrolling"
        for control in _controls(page):
            box = QRect(control.mapTo(inner, QPoint(0, 0)), control.size())
            name = control.objectName() or control.text() if hasattr(control, "text") else ""
            assert inner.rect().contains(box), f"{name} outside its page"
            assert control.width() >= min(control.minimumSizeHint().width(), 40), name
            assert box.height() <= view.height(), name
            bar = page.verticalScrollBar()
            bar.setValue(min(box.top(), bar.maximum()))
            QApplication.processEvents()
            seen = QRect(control.mapTo(view, QPoint(0, 0)), control.size())
            assert view.rect().contains(seen), f"{name} not fully visible after scrolling"
            checked += 1
    fields = sum(len(page.bindings) for page in window.tabs.values())
    assert checked >= fields + 6  # every field, the preset choosers and their buttons


def test_tab_labels_are_whole(qtbot: Any, window: Any) -> None:
    _at_laptop_size(qtbot, window)
    for tabs in (window.inputs, window.results):
        bar = tabs.tabBar()
        for i in range(bar.count()):
            text = bar.tabText(i).replace("&", "")
            assert bar.tabRect(i).width() >= bar.fontMetrics().horizontalAdvance(text), text
            assert bar.rect().contains(bar.tabRect(i)), text


def test_the_input_panel_widens_past_its_opening_width(qtbot: Any, window: Any) -> None:
    """The old layout stopped the splitter at ≈285 px on a 1366-px screen."""
    _at_laptop_size(qtbot, window)
    window.splitter.setSizes([700, LAPTOP.width() - 700])
    QApplication.processEvents()
    assert window.inputs.width() >= 650
    assert window.minimumSizeHint().width() <= LAPTOP.width()


def test_window_fits_the_available_screen() -> None:
    """The preferred 1280×800 shrinks to a 1366×768 screen's available area less the
    frame; it is never larger than the screen."""
    got = fitted(QSize(1280, 800), QRect(0, 0, 1366, 740))
    assert got.width() <= 1366 and got.height() <= 740 - 30


@pytest.mark.parametrize("menu_name, count", [("&Inputs", 5), ("&Results", 7)])
def test_every_tab_has_a_listed_shortcut(window: Any, menu_name: str, count: int) -> None:
    view = next(a.menu() for a in window.menuBar().actions() if a.text() == "&View")
    sub = next(a.menu() for a in view.actions() if a.menu() and a.text() == menu_name)
    shortcuts = [a.shortcut().toString() for a in sub.actions()]
    assert len(shortcuts) >= count and all(shortcuts)
    sub.actions()[2].trigger()
    tabs = window.inputs if menu_name == "&Inputs" else window.results
    assert tabs.currentIndex() == 2
