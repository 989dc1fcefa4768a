"""The analyst's workbench in the main window: the Layouts and Sweep tabs, File →
Compare, and Help — attached by one object so the window keeps only small hooks.

:class:`Workbench` adds its tabs to the window's results tabs and its actions to the
menus, takes the GPU counts the window's worker delivers (the Layouts tab never
searches), follows the unit choice, stops its background jobs when the window closes,
and tells the report which comparison and sweep to include (only ones asked for, and
of the plan being reported).
"""

from __future__ import annotations

from typing import Any

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMainWindow, QMenu, QTabWidget

from gui.compare.compare_actions import CompareActions
from gui.document import PlanDocument
from gui.help import HelpMenu
from gui.sweep.sweep_panel import SweepPanel
from gui.views.layouts import LayoutsView


class Workbench:
    """Layouts, Sweep, Compare and Help for one main window."""

    def __init__(
        self,
        window: QMainWindow,
        doc: PlanDocument,
        results: QTabWidget,
        file_menu: QMenu,
        before: QAction,
        units: str,
    ) -> None:
        self.doc = doc
        self.units = units
        self.layouts = LayoutsView(doc, window)
        results.addTab(self.layouts, "Layouts")
        self.sweep = SweepPanel(doc, units, window)
        results.addTab(self.sweep, "Sweep")
        self.compare = CompareActions(window, doc)
        file_menu.insertAction(before, self.compare.with_saved)
        file_menu.insertAction(before, self.compare.with_file)
        file_menu.insertSeparator(before)
        self.help = HelpMenu(window)

    def show_counts(self, counts: object, levers: object = None) -> None:
        """The counts and fit levers' parts of the plan on screen (None while searched)."""
        self.layouts.show_counts(counts, self.units, levers)

    def show_levers(self, levers: object, counts: object) -> None:
        """The fit levers' part arrived (after the counts: they cost the most)."""
        self.layouts.show_levers(levers, counts)

    def set_units(self, units: str) -> None:
        self.units = units
        self.sweep.set_units(units)
        self.compare.set_units(units)

    def report_extras(self) -> dict[str, Any]:
        """What File → Export Report adds: the comparison and the sweep the user asked
        to include, when they are of the plan being reported."""
        est = self.doc.estimate
        if est is None:
            return {}
        extras: dict[str, Any] = {}
        comparison = self.compare.for_report(est.config_hash)
        if comparison is not None:
            extras["comparison"] = comparison
        sweep = self.sweep.for_report()
        if sweep is not None:
            extras["sweep"] = sweep
        return extras

    def shutdown(self) -> None:
        self.sweep.shutdown()
        self.compare.shutdown()
