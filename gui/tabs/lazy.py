"""Input tabs built when first needed: on first show, or when code asks for one.

The five input tabs hold about 140 generated fields; building them all before the window
first appears was a third of a second of the start. :class:`LazyTabs` puts an empty
:class:`TabSlot` in the tab widget for each page and builds the page into its slot the
first time the tab is shown — or the first time anything looks the page up through the
mapping (``tabs["hardware"]``, ``tabs.values()``), so callers and tests see every page
exactly as if it had been built up front. :meth:`LazyTabs.built` lists only the pages
made so far, for work that an unbuilt page does not need (units, shutdown): a page
takes the window's state when it is built.

The tab widget is kept at least as wide as the widest page built so far needs (and its
tab bar), so a splitter cannot squeeze a field out of sight; the pages' needs differ by
a few per cent, and the panel opens wider than any of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from PySide6.QtWidgets import QTabWidget, QVBoxLayout, QWidget

from gui.tabs.base import TabPage

PageBuilder = Callable[[type[TabPage], QWidget], TabPage]
"""Builds a page of the given class into the given parent (its slot)."""


class TabSlot(QWidget):
    """The tab widget's page: empty until its input page is built into it."""

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.column = QVBoxLayout(self)
        self.column.setContentsMargins(0, 0, 0, 0)
        self.page: TabPage | None = None


class LazyTabs(Mapping[str, TabPage]):
    """Key → input page of ``tabs``, each built on first show or first lookup."""

    def __init__(self, tabs: QTabWidget, build: PageBuilder) -> None:
        self.tabs = tabs
        self.build = build
        self._keys: list[str] = []
        self._classes: dict[str, type[TabPage]] = {}
        self._slots: dict[str, TabSlot] = {}
        tabs.currentChanged.connect(self._shown)

    def add(self, key: str, title: str, cls: type[TabPage]) -> None:
        slot = TabSlot(self.tabs)
        self._keys.append(key)
        self._classes[key] = cls
        self._slots[key] = slot
        self.tabs.addTab(slot, title)
        self._widen(0)

    def _shown(self, index: int) -> None:
        if 0 <= index < len(self._keys):
            self.page(self._keys[index])

    def __getitem__(self, key: str) -> TabPage:
        return self.page(key)

    def page(self, key: str) -> TabPage:
        """The page of ``key``, built now if it was not yet."""
        slot = self._slots[key]
        if slot.page is None:
            slot.page = self.build(self._classes[key], slot)
            slot.column.addWidget(slot.page)
            slot.page.show()  # now, not on a later event-loop turn (if the slot is shown)
            self._widen(slot.page.minimumSizeHint().width())
        return slot.page

    def _widen(self, page_width: int) -> None:
        width = max(self.tabs.tabBar().sizeHint().width(), page_width) + 4
        if width > self.tabs.minimumWidth():
            self.tabs.setMinimumWidth(width)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def index_of(self, key: str) -> int:
        return self._keys.index(key)

    def built(self) -> list[TabPage]:
        """The pages made so far (in tab order)."""
        return [s.page for k in self._keys if (s := self._slots[k]).page is not None]
