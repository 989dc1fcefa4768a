"""The Measured result tab and the Measured runs menu, without importing them at start.

:mod:`gui.trace.measured` (the trace panel and chart, the engine's trace comparison, records,
reconciliation and calibration) is about 60 ms of imports a window that never looks at
measurements would pay at every start. :class:`MeasuredTab` sits in the result tabs
empty and builds the view the first time it is shown or asked for
(:attr:`MeasuredTab.view`); until then the window only counts the records for the tab's
label. The menu's actions are present from the start and import the module when first
triggered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtGui import QAction, QShowEvent
from PySide6.QtWidgets import QMenu, QVBoxLayout, QWidget

from gui.document import PlanDocument

if TYPE_CHECKING:
    from gui.trace.measured import MeasuredView


class MeasuredTab(QWidget):
    """The Measured tab's page: its view is built on first show or first lookup, and
    shows the document it was last given."""

    def __init__(self, doc: PlanDocument, units: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.doc, self.units = doc, units
        self.column = QVBoxLayout(self)
        self.column.setContentsMargins(0, 0, 0, 0)
        self._view: MeasuredView | None = None

    @property
    def built(self) -> bool:
        return self._view is not None

    @property
    def view(self) -> MeasuredView:
        """The view, built now (showing the last document given) if it was not yet."""
        if self._view is None:
            from gui.trace.measured import MeasuredView

            self._view = MeasuredView(self)
            self.column.addWidget(self._view)
            self._view.show_document(self.doc, self.units)
        return self._view

    def show_document(self, doc: PlanDocument, units: str) -> None:
        """Show ``doc`` in the view if it is built (else when it is)."""
        self.doc, self.units = doc, units
        if self._view is not None:
            self._view.show_document(doc, units)

    def showEvent(self, event: QShowEvent) -> None:
        self.view.show()
        super().showEvent(event)

    def shutdown(self) -> None:
        """Stop a running trace (the window is closing); nothing to stop if unbuilt."""
        if self._view is not None:
            self._view.shutdown()


def measured_menu(menu: QMenu, window: QWidget, doc: PlanDocument) -> tuple[QAction, QAction]:
    """Measured runs → Attach records… and Calibrate from records… (the module that
    does them is imported on first use)."""

    def attach() -> None:
        from gui.trace.measured import ask_attach

        ask_attach(window, doc)

    def calibrate() -> None:
        from gui.trace.measured import calibrate as propose_and_apply

        propose_and_apply(window, doc)

    return menu.addAction("&Attach records…", attach), menu.addAction(
        "&Calibrate from records…", calibrate
    )
