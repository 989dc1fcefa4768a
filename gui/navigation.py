"""Keyboard routes to every tab: View → Inputs (Alt+1…) and View → Results (Ctrl+1…).

Each tab gets an action with a shortcut, listed in the View menu so the shortcuts are
discoverable; choosing one shows the tab and moves the focus into it (the first field of
an input tab), so a keyboard user reaches every control without the mouse.
"""

from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMenu, QTabWidget, QWidget

from gui.tabs.base import TabPage


def _focus_into(tabs: QTabWidget, index: int) -> None:
    tabs.setCurrentIndex(index)
    page = tabs.widget(index)
    if page is None:
        return
    target: QWidget = page.focusProxy() or page
    # the first widget in tab order inside the page, else the page itself
    nxt: QWidget | None = target.nextInFocusChain()
    while nxt is not None and nxt is not target:
        takes = nxt.focusPolicy() & Qt.FocusPolicy.TabFocus and nxt.isEnabled()
        if takes and page.isAncestorOf(nxt) and nxt.isVisibleTo(page):
            nxt.setFocus(Qt.FocusReason.ShortcutFocusReason)
            return
        nxt = nxt.nextInFocusChain()
    page.setFocus(Qt.FocusReason.ShortcutFocusReason)


def focus_field(inputs: QTabWidget, pages: Iterable[TabPage], path: str) -> None:
    """Show the input tab holding ``path``'s field (``pages`` in tab order), scroll to
    the field and focus it."""
    for i, page in enumerate(pages):
        binding = page.bindings.get(path)
        if binding is not None:
            inputs.setCurrentIndex(i)
            page.ensureWidgetVisible(binding.editor)
            binding.editor.setFocus(Qt.FocusReason.OtherFocusReason)
            return


def tab_actions(menu: QMenu, tabs: QTabWidget, modifier: str, owner: QWidget) -> list[QAction]:
    """One action per tab of ``tabs`` in ``menu``: ``modifier``+1, +2, … (nine at most)."""
    actions = []
    for i in range(min(tabs.count(), 9)):
        text = tabs.tabText(i).split(" (")[0]
        action = QAction(f"&{i + 1} {text}", owner)
        action.setShortcut(QKeySequence(f"{modifier}+{i + 1}"))
        action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        action.triggered.connect(lambda _c=False, n=i: _focus_into(tabs, n))
        menu.addAction(action)
        actions.append(action)
    return actions
