"""The main window: input tabs on the left, verdict, chart and ledger on the right.

Every view redraws from the document's latest Estimate; the document coalesces the
edits of one event-loop turn into one recompute, so the chart, table and verdict move
together on each keystroke. The slow parts of the plan's analysis (GPU counts,
diagnostics, what fits the layout, sensitivity) come from ``engine.analysis`` in a worker
process once the edits settle; each arrives tagged with its plan's config hash and is
shown only if that plan's estimate is still the one on screen.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

from PySide6.QtCore import QByteArray, QEvent, Qt
from PySide6.QtGui import (
    QAction,
    QActionGroup,
    QCloseEvent,
    QDragEnterEvent,
    QDropEvent,
    QKeySequence,
    QShowEvent,
)
from PySide6.QtWidgets import (
    QLabel,
    QListWidgetItem,
    QMainWindow,
    QSplitter,
    QTabBar,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from engine.errors import PlanError
from engine.layout import GpuCounts
from gui.document import PlanDocument
from gui.files.autosave import Autosaver
from gui.files.file_actions import FileActions
from gui.frameworks.framework_menu import FrameworkMenu
from gui.history_actions import history_actions
from gui.main_toolbar import main_toolbar
from gui.navigation import focus_field, tab_actions
from gui.plan_properties import properties_action
from gui.report.actions import ReportActions
from gui.screen_fit import clamp_to_screen, fit_window
from gui.settings import Settings
from gui.tabs.hardware import HardwareTab
from gui.tabs.lazy import LazyTabs
from gui.tabs.method import MethodTab
from gui.tabs.model import ModelTab, count_presets_soon, follow_totals
from gui.tabs.offload import OffloadTab
from gui.tabs.parallelism import ParallelismTab
from gui.trace.measured_tab import MeasuredTab, measured_menu
from gui.views.banner import InvalidBanner
from gui.views.chart import LedgerChart, legend_html, panel_groups
from gui.views.diagnostics import DiagnosticsList, suggestion_of
from gui.views.legend_label import LegendLabel
from gui.views.stages import StagesView
from gui.views.table import LedgerTable
from gui.views.traffic import TrafficView
from gui.views.verdict import VerdictPanel
from gui.workbench import Workbench
from gui.workers import gc_policy, gil_policy
from gui.workers.analysis_parts import AnalysisParts

UNIT_LABELS = {"gb": "GB (10⁹ B)", "gib": "GiB (2³⁰ B)", "both": "GB and GiB"}

STATUS_SAMPLE = "config 0123456789ab · 00000 ledger rows"
"""The widest status line the window writes (its label is sized for it)."""

INPUT_SHARE = 0.36
"""Share of the window's width the input panel opens with (the user can drag it)."""
INPUT_MAX_OPEN_WIDTH = 600
"""Widest the input panel opens (wider is the user's choice, by the splitter)."""


class MainWindow(QMainWindow):
    def __init__(
        self, settings: Settings, doc: PlanDocument | None = None, autosave_ms: int | None = None
    ) -> None:
        super().__init__()
        self.settings = settings
        self.doc = doc or PlanDocument(self)
        self.units = settings.units()
        self.setAcceptDrops(True)
        fit_window(self)
        self.files = FileActions(self, self.doc, settings)
        self.autosaver = (
            Autosaver(self.doc)
            if autosave_ms is None
            else Autosaver(self.doc, interval_ms=autosave_ms)
        )
        self.analysis = AnalysisParts(self.doc, self)
        self.analysis.arrived.connect(self._part_arrived)
        self.analysis.searching.connect(lambda: self._result_tab(2, "Diagnostics"))
        self.analysis.failed.connect(self._analysis_failed)
        self.worker = self.analysis.worker
        self._build()
        self._menus()
        self.doc.estimateChanged.connect(self.redraw)
        self.doc.measurementsChanged.connect(self._show_measured)
        self.doc.estimateFailed.connect(self._estimate_failed)
        self.doc.pathChanged.connect(self._title)
        self.doc.propertiesChanged.connect(self._title)
        self.doc.dirtyChanged.connect(lambda _d: self._title())
        self.doc.invalidChanged.connect(self._invalid_changed)
        self.redraw()
        self._title()
        geometry = settings.blob("geometry")
        if geometry:
            self.restoreGeometry(QByteArray(geometry))
            clamp_to_screen(self)
        split = settings.blob("splitter")
        if split:
            self.splitter.restoreState(QByteArray(split))
        else:
            self._open_splitter()
        gc_policy.install()
        gil_policy.install()

    # layout ----------------------------------------------------------------------
    def _build(self) -> None:
        self.inputs = QTabWidget(self)
        self.inputs.setObjectName("inputTabs")
        bar: QTabBar = self.inputs.tabBar()
        bar.setElideMode(Qt.TextElideMode.ElideNone)  # "Parallelism", never "Para…"
        bar.setUsesScrollButtons(False)
        bar.setExpanding(False)
        # each page is built on first show or lookup, with the units of that moment
        self.tabs = LazyTabs(self.inputs, lambda cls, slot: cls(self.doc, self.units, slot))
        follow_totals(self.worker, lambda: cast(ModelTab, self.tabs["model"]))
        for key, title, cls in (
            ("model", "Model", ModelTab),
            ("method", "Method", MethodTab),
            ("parallelism", "Parallelism", ParallelismTab),
            ("hardware", "Hardware", HardwareTab),
            ("offload", "Offload", OffloadTab),
        ):
            self.tabs.add(key, title, cls)
        self.banner = InvalidBanner(self.doc, self.go_to_field, self)
        self.verdict = VerdictPanel(self)
        self.chart = LedgerChart(self)
        self.chart.setMinimumHeight(180)
        self.legend = LegendLabel(self)
        self.legend.setObjectName("chartLegend")
        self.table = LedgerTable(self)
        self.stages = StagesView(self)
        self.diagnostics = DiagnosticsList(self)
        self.diagnostics.itemDoubleClicked.connect(self.apply_suggestion)
        self.results = QTabWidget(self)
        self.results.setObjectName("resultTabs")
        self.results.addTab(self.table, "Ledger")
        self.results.addTab(self.stages, "Stages")
        self.results.addTab(self.diagnostics, "Diagnostics")
        self.measured = MeasuredTab(self.doc, self.units, self)
        self.results.addTab(self.measured, "Measured")
        self.traffic = TrafficView(self)
        self.results.addTab(self.traffic, "Per step")
        chart_box = QWidget(self)
        col = QVBoxLayout(chart_box)
        col.setContentsMargins(0, 0, 0, 0)
        col.setSpacing(2)
        col.addWidget(self.chart, 1)
        col.addWidget(self.legend)
        right_split = QSplitter(Qt.Orientation.Vertical, self)
        right_split.addWidget(chart_box)
        right_split.addWidget(self.results)
        right_split.setStretchFactor(0, 5)
        right_split.setStretchFactor(1, 4)
        right = QWidget(self)
        rcol = QVBoxLayout(right)
        rcol.setContentsMargins(0, 0, 0, 0)
        rcol.addWidget(self.banner)
        rcol.addWidget(self.verdict)
        rcol.addWidget(right_split, 1)
        self.splitter = QSplitter(Qt.Orientation.Horizontal, self)
        self.splitter.addWidget(self.inputs)
        self.splitter.addWidget(right)
        self.splitter.setStretchFactor(0, 0)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setChildrenCollapsible(False)
        self.setCentralWidget(self.splitter)
        self.status = QLabel(self)
        # A fixed size: its text changes on every edit, and a label that may grow would
        # lay the whole window out (and repaint it) each time.
        sample = self.status.fontMetrics().horizontalAdvance(STATUS_SAMPLE)
        self.status.setFixedSize(sample, self.status.sizeHint().height())
        self.statusBar().addPermanentWidget(self.status)

    def _menus(self) -> None:
        f = self.files
        file_menu = self.menuBar().addMenu("&File")
        file_menu.addActions([f.new, f.open])
        file_menu.addMenu(f.recent_menu)
        file_menu.addSeparator()
        file_menu.addActions([f.save, f.save_as, f.revert])
        file_menu.addSeparator()
        self.properties_action = properties_action(self, self.doc)
        file_menu.addAction(self.properties_action)
        file_menu.addSeparator()
        self.framework = FrameworkMenu(self, self.doc)
        file_menu.addActions([self.framework.import_action, self.framework.import_folder_action])
        file_menu.addMenu(self.framework.export_menu)
        file_menu.addSeparator()
        self.report_actions = ReportActions(self, self.doc)
        file_menu.addActions([self.report_actions.export, self.report_actions.print])
        file_menu.addSeparator()
        quit_action = file_menu.addAction("&Quit", self.close)
        quit_action.setShortcut(QKeySequence(QKeySequence.StandardKey.Quit))
        edit = self.menuBar().addMenu("&Edit")
        self.undo_action, self.redo_action = history_actions(self.doc, self)
        edit.addActions([self.undo_action, self.redo_action])
        runs = self.menuBar().addMenu("&Measured runs")
        self.attach_action, self.calibrate_action = measured_menu(runs, self, self.doc)
        view = self.menuBar().addMenu("&View")
        group = QActionGroup(self)
        self.unit_actions: dict[str, QAction] = {}
        for key, text in UNIT_LABELS.items():
            action = view.addAction(f"Units: {text}")
            action.setCheckable(True)
            action.setChecked(key == self.units)
            action.triggered.connect(lambda _c=False, k=key: self.set_units(k))
            group.addAction(action)
            self.unit_actions[key] = action
        view.addSeparator()
        tab_actions(view.addMenu("&Inputs"), self.inputs, "Alt", self)
        self.unit_combo = main_toolbar(
            self,
            (f.new, f.open, f.save),
            (self.undo_action, self.redo_action),
            UNIT_LABELS,
            self.units,
            self.set_units,
        )
        self.workbench = Workbench(self, self.doc, self.results, file_menu, quit_action, self.units)
        tab_actions(view.addMenu("&Results"), self.results, "Ctrl", self)

    # views -------------------------------------------------------------------------
    def redraw(self) -> None:
        est, plan = self.doc.estimate, self.doc.plan
        if est is None:
            return
        self.verdict.show_estimate(plan, est, self.units)
        if self.doc.invalid or self.doc.stale:  # not this plan's figures: the badge stays grey
            self._invalid_changed()
        self.chart.show_estimate(plan, est, self.units)
        groups, spread = panel_groups(self.chart.panels)
        self.legend.setText(legend_html(groups, spread))
        self.table.show_rows(est.rows)
        self.table.set_units(self.units)
        self.traffic.show_estimate(plan, est, self.units)
        self.stages.show_estimate(plan, est, self.units)
        self._show_measured()
        self.status.setText(f"config {est.config_hash[:12]} · {len(est.rows)} ledger rows")
        self.analysis.follow(est.config_hash)  # counts and suggestions: after typing
        self._show_counts()
        self._diagnostics()

    def _part_arrived(self, part: str) -> None:
        if part == "counts":
            self._show_counts()
        elif part == "lever_summaries":
            parts = self.analysis.parts
            self.workbench.show_levers(parts.get(part), parts.get("counts"))
        elif part in ("diagnosis", "fit"):
            self._diagnostics()

    def _show_counts(self) -> None:
        counts = self.analysis.parts.get("counts")
        self.workbench.show_counts(counts, self.analysis.parts.get("lever_summaries"))
        if isinstance(counts, GpuCounts):
            self.verdict.show_counts(counts)
        elif isinstance(counts, PlanError):
            self.verdict.show_counts_unavailable(str(counts))

    def _analysis_failed(self, reason: str) -> None:
        """The worker process died: say so where the counts would be; the estimate on
        screen stays, and the next edit searches again in a new process."""
        message = f"Layout search stopped ({reason}); edit the plan to search again."
        self.verdict.show_counts_unavailable(message)
        self.statusBar().showMessage(message)

    def _result_tab(self, index: int, text: str) -> None:
        """Rename a result tab only when its text changes (a rename lays the tab bar,
        and with it the window, out again)."""
        if self.results.tabText(index) != text:
            self.results.setTabText(index, text)

    def _show_measured(self) -> None:
        self.measured.show_document(self.doc, self.units)
        n = len(self.doc.measurements)
        self._result_tab(3, f"Measured ({n})" if n else "Measured")

    def _diagnostics(self) -> None:
        self.diagnostics.show_document(self.doc, self.analysis.parts, self.units)

    def apply_suggestion(self, item: QListWidgetItem) -> None:
        """Apply a double-clicked suggestion as one undo step."""
        got = suggestion_of(item)
        if got is not None:
            self.doc.set_many(*got)

    def _estimate_failed(self, message: str) -> None:
        self.verdict.set_stale(message)
        self._diagnostics()
        self._result_tab(2, "Diagnostics (1 error)")

    def _invalid_changed(self) -> None:
        """While a field holds a refused value the figures are the last valid plan's:
        the badge goes grey like a plan the engine cannot compute."""
        if self.doc.invalid:
            self.verdict.set_stale(next(iter(self.doc.invalid.values())))
        elif self.doc.stale:
            self.verdict.set_stale(self.doc.estimate_error)
        elif self.doc.estimate is not None:
            self.verdict.show_estimate(self.doc.plan, self.doc.estimate, self.units)
            self._show_counts()

    def go_to_field(self, path: str) -> None:
        """Show the tab holding ``path``'s field, scroll to it and focus it."""
        focus_field(self.inputs, self.tabs.values(), path)

    def _open_splitter(self) -> None:
        """The input panel's opening width: a share of the window, within bounds."""
        total = max(self.width(), 1)
        left = max(self.inputs.minimumWidth(), min(INPUT_MAX_OPEN_WIDTH, int(total * INPUT_SHARE)))
        self.splitter.setSizes([left, max(total - left, 1)])

    def set_units(self, units: str) -> None:
        self.units = units
        self.settings.set_units(units)
        self.unit_combo.setCurrentIndex(self.unit_combo.findData(units))
        self.unit_actions[units].setChecked(True)
        for page in self.tabs.built():  # a page built later takes self.units
            page.set_units(units)
        self.workbench.set_units(units)
        self.redraw()

    def _title(self) -> None:
        self.setWindowTitle(f"{self.doc.title()}[*] — MemPlan")
        self.setWindowModified(self.doc.dirty)

    # window events -----------------------------------------------------------------
    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self.analysis.release()  # the worker process starts once the window is up
        count_presets_soon(self.worker)  # for the Model tab's chooser, by that process

    def changeEvent(self, event: QEvent) -> None:
        """Follow a light/dark switch of the system palette in the charts too."""
        if event.type() == QEvent.Type.PaletteChange:
            self.redraw()  # the charts paint with the palette's text colour
            if self.stages.chart is not None:
                self.stages.chart.update()
        super().changeEvent(event)

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if any(u.toLocalFile().endswith(".memplan") for u in event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        for url in event.mimeData().urls():
            path = url.toLocalFile()
            if path.endswith(".memplan"):
                event.acceptProposedAction()
                self.files.open_file(path)
                return

    def closeEvent(self, event: QCloseEvent) -> None:
        if not self.files.maybe_save():
            event.ignore()
            return
        self.settings.set_blob("geometry", bytes(self.saveGeometry().data()))
        self.settings.set_blob("splitter", bytes(self.splitter.saveState().data()))
        self.autosaver.clear()
        self.analysis.shutdown()
        self.report_actions.shutdown()
        self.workbench.shutdown()
        self.measured.shutdown()
        for page in self.tabs.built():
            page.shutdown()
        event.accept()

    def open_initial(self, path: str | None) -> None:
        """Open the file given on the command line (errors are shown, default stays)."""
        if path:
            self.files.open_file(str(Path(path)), ask=False)
