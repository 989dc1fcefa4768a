"""The main window: input tabs on the left, verdict, chart and ledger on the right.

Every view redraws from the document's latest Estimate; the document coalesces the
edits of one event-loop turn into one recompute, so the chart, table and verdict move
together on each keystroke. The slow parts of the plan's analysis (GPU counts,
diagnostics, what fits the layout, sensitivity) come from ``engine.analysis`` on a worker
thread once the edits settle; each arrives tagged with its plan's config hash and is
shown only if that plan's estimate is still the one on screen.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QByteArray, QEvent, Qt, QTimer
from PySide6.QtGui import (
    QAction,
    QActionGroup,
    QCloseEvent,
    QDragEnterEvent,
    QDropEvent,
    QKeySequence,
)
from PySide6.QtWidgets import (
    QComboBox,
    QLabel,
    QListWidgetItem,
    QMainWindow,
    QSplitter,
    QStackedWidget,
    QTabWidget,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from engine.errors import PlanError
from engine.layout import GpuCounts
from gui import measured
from gui.autosave import Autosaver
from gui.document import PlanDocument
from gui.file_actions import FileActions
from gui.framework_actions import FrameworkActions
from gui.measured import MeasuredView
from gui.report.actions import ReportActions
from gui.settings import Settings
from gui.tabs.base import TabPage
from gui.tabs.hardware import HardwareTab
from gui.tabs.method import MethodTab
from gui.tabs.model import ModelTab
from gui.tabs.offload import OffloadTab
from gui.tabs.parallelism import ParallelismTab
from gui.views.chart import LedgerChart, StageChart, legend_html, panel_groups, style_plot
from gui.views.diagnostics import DiagnosticsList, suggestion_of
from gui.views.table import LedgerTable
from gui.views.verdict import VerdictPanel
from gui.workbench import Workbench
from gui.workers import AnalysisWorker

UNIT_LABELS = {"gb": "GB (10⁹ B)", "gib": "GiB (2³⁰ B)", "both": "GB and GiB"}


SLOW_VIEWS_DELAY_MS = 150
"""Idle time after the last edit before the layout search and suggestions rerun."""


class MainWindow(QMainWindow):
    def __init__(
        self, settings: Settings, doc: PlanDocument | None = None, autosave_ms: int | None = None
    ) -> None:
        super().__init__()
        self.settings = settings
        self.doc = doc or PlanDocument(self)
        self.units = settings.units()
        self.setAcceptDrops(True)
        self.resize(1280, 800)
        self.files = FileActions(self, self.doc, settings)
        self.autosaver = (
            Autosaver(self.doc)
            if autosave_ms is None
            else Autosaver(self.doc, interval_ms=autosave_ms)
        )
        self._slow = QTimer(self)
        self._slow.setSingleShot(True)
        self._slow.setInterval(SLOW_VIEWS_DELAY_MS)
        self._slow.timeout.connect(self._slow_views)
        self.worker = AnalysisWorker(self)
        self.worker.partReady.connect(self._part_ready)
        self._parts_key = ""  # config hash the parts below were computed for
        self._parts: dict[str, object] = {}
        self._build()
        self._menus()
        self.doc.estimateChanged.connect(self.redraw)
        self.doc.measurementsChanged.connect(self._show_measured)
        self.doc.estimateFailed.connect(self._estimate_failed)
        self.doc.pathChanged.connect(self._title)
        self.doc.dirtyChanged.connect(lambda _d: self._title())
        self.redraw()
        self._title()
        geometry = settings.blob("geometry")
        if geometry:
            self.restoreGeometry(QByteArray(geometry))
        split = settings.blob("splitter")
        if split:
            self.splitter.restoreState(QByteArray(split))

    # layout ----------------------------------------------------------------------
    def _build(self) -> None:
        self.inputs = QTabWidget(self)
        self.inputs.setObjectName("inputTabs")
        self.tabs: dict[str, TabPage] = {}
        for key, title, cls in (
            ("model", "Model", ModelTab),
            ("method", "Method", MethodTab),
            ("parallelism", "Parallelism", ParallelismTab),
            ("hardware", "Hardware", HardwareTab),
            ("offload", "Offload", OffloadTab),
        ):
            page = cls(self.doc, self.units, self.inputs)
            self.tabs[key] = page
            self.inputs.addTab(page, title)
        self.verdict = VerdictPanel(self)
        self.chart = LedgerChart(self)
        self.chart.setMinimumHeight(250)
        self.legend = QLabel(self)
        self.legend.setObjectName("chartLegend")
        self.legend.setWordWrap(True)
        self.table = LedgerTable(self)
        self.stage_chart = StageChart(self)
        self.stage_note = QLabel(
            "Single pipeline stage (PP = 1): every rank holds the same "
            "layers. Set PP > 1 on the Parallelism tab to compare stages."
        )
        self.stage_note.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.stage_note.setWordWrap(True)
        self.stages = QStackedWidget(self)
        self.stages.addWidget(self.stage_note)
        self.stages.addWidget(self.stage_chart)
        self.diagnostics = DiagnosticsList(self)
        self.diagnostics.itemDoubleClicked.connect(self.apply_suggestion)
        self.results = QTabWidget(self)
        self.results.setObjectName("resultTabs")
        self.results.addTab(self.table, "Ledger")
        self.results.addTab(self.stages, "Stages")
        self.results.addTab(self.diagnostics, "Diagnostics")
        self.measured = MeasuredView(self)
        self.results.addTab(self.measured, "Measured")
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
        rcol.addWidget(self.verdict)
        rcol.addWidget(right_split, 1)
        self.splitter = QSplitter(Qt.Orientation.Horizontal, self)
        self.splitter.addWidget(self.inputs)
        self.splitter.addWidget(right)
        self.splitter.setStretchFactor(0, 0)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([440, 840])
        self.setCentralWidget(self.splitter)
        self.status = QLabel(self)
        self.statusBar().addPermanentWidget(self.status)

    def _menus(self) -> None:
        f = self.files
        file_menu = self.menuBar().addMenu("&File")
        for action in (f.new, f.open):
            file_menu.addAction(action)
        file_menu.addMenu(f.recent_menu)
        file_menu.addSeparator()
        for action in (f.save, f.save_as, f.revert):
            file_menu.addAction(action)
        file_menu.addSeparator()
        self.report_actions = ReportActions(self, self.doc)
        file_menu.addAction(self.report_actions.export)
        file_menu.addAction(self.report_actions.print)
        file_menu.addSeparator()
        self.framework = FrameworkActions(self, self.doc)
        file_menu.addAction(self.framework.import_action)
        file_menu.addAction(self.framework.import_folder_action)
        file_menu.addMenu(self.framework.export_menu)
        file_menu.addSeparator()
        quit_action = file_menu.addAction("&Quit", self.close)
        quit_action.setShortcut(QKeySequence(QKeySequence.StandardKey.Quit))
        edit = self.menuBar().addMenu("&Edit")
        self.undo_action = self.doc.undo_stack.createUndoAction(self, "&Undo")
        self.undo_action.setShortcut(QKeySequence(QKeySequence.StandardKey.Undo))
        self.redo_action = self.doc.undo_stack.createRedoAction(self, "&Redo")
        self.redo_action.setShortcut(QKeySequence(QKeySequence.StandardKey.Redo))
        edit.addAction(self.undo_action)
        edit.addAction(self.redo_action)
        runs = self.menuBar().addMenu("&Measured runs")
        self.attach_action = runs.addAction(
            "&Attach records…", lambda: measured.ask_attach(self, self.doc)
        )
        self.calibrate_action = runs.addAction(
            "&Calibrate from records…", lambda: measured.calibrate(self, self.doc)
        )
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
        bar = QToolBar("Main", self)
        bar.setObjectName("mainToolbar")
        bar.setMovable(False)
        bar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        for action in (f.new, f.open, f.save, self.undo_action, self.redo_action):
            bar.addAction(action)
        bar.addSeparator()
        bar.addWidget(QLabel(" Units ", bar))
        self.unit_combo = QComboBox(bar)
        self.unit_combo.setObjectName("unitCombo")
        for key, text in UNIT_LABELS.items():
            self.unit_combo.addItem(text, key)
        self.unit_combo.setCurrentIndex(self.unit_combo.findData(self.units))
        self.unit_combo.activated.connect(lambda i: self.set_units(self.unit_combo.itemData(i)))
        bar.addWidget(self.unit_combo)
        self.addToolBar(bar)
        self.workbench = Workbench(self, self.doc, self.results, file_menu, quit_action, self.units)

    # views -------------------------------------------------------------------------
    def redraw(self) -> None:
        est, plan = self.doc.estimate, self.doc.plan
        if est is None:
            return
        self.verdict.show_estimate(plan, est, self.units)
        self.chart.show_estimate(plan, est, self.units)
        groups, spread = panel_groups(self.chart.panels)
        self.legend.setText(legend_html(groups, spread))
        self.table.show_rows(est.rows)
        self.table.set_units(self.units)
        if len(est.stages) > 1:
            self.stage_chart.show_estimate(plan, est, self.units)
            self.stages.setCurrentWidget(self.stage_chart)
        else:
            self.stages.setCurrentWidget(self.stage_note)
        self._show_measured()
        self.status.setText(f"config {est.config_hash[:12]} · {len(est.rows)} ledger rows")
        if self._parts_key != est.config_hash:
            self._parts_key, self._parts = est.config_hash, {}
        self._show_counts()
        self._diagnostics()
        self._slow.start()  # counts and suggestions re-estimate many plans: after typing

    def _slow_views(self) -> None:
        """Ask the worker for the parts that search or re-estimate (GPU counts,
        diagnostics, fit, sensitivity) once the edits settle, so a keystroke only costs
        the cheap redraw and the GUI thread never searches."""
        est = self.doc.estimate
        if est is None or self.doc.pending or self.doc.stale:
            return
        self.results.setTabText(2, "Diagnostics")
        if all(p in self._parts for p in ("counts", "diagnosis", "fit")):
            return  # a redraw of the same plan (units, palette): nothing to search
        self.worker.submit(self.doc.plan)

    def _part_ready(self, key: str, part: str, value: object) -> None:
        """One part of the analysis, for the plan of hash ``key``: dropped unless that
        plan's estimate is the one on screen."""
        est = self.doc.estimate
        if est is None or self.doc.stale or key != est.config_hash or key != self._parts_key:
            return
        self._parts[part] = value
        if part == "counts":
            self._show_counts()
        elif part in ("diagnosis", "fit"):
            self._diagnostics()

    def _show_counts(self) -> None:
        counts = self._parts.get("counts")
        self.workbench.show_counts(counts)
        if isinstance(counts, GpuCounts):
            self.verdict.show_counts(counts)
        elif isinstance(counts, PlanError):
            self.verdict.show_counts_unavailable(str(counts))

    def _show_measured(self) -> None:
        self.measured.show_document(self.doc, self.units)
        n = len(self.doc.measurements)
        self.results.setTabText(3, f"Measured ({n})" if n else "Measured")

    def _diagnostics(self) -> None:
        self.diagnostics.show_document(self.doc, self._parts, self.units)

    def apply_suggestion(self, item: QListWidgetItem) -> None:
        """Apply a double-clicked suggestion as one undo step."""
        got = suggestion_of(item)
        if got is not None:
            self.doc.set_many(*got)

    def _estimate_failed(self, message: str) -> None:
        self.verdict.set_stale(message)
        self._diagnostics()
        self.results.setTabText(2, "Diagnostics (1 error)")

    def set_units(self, units: str) -> None:
        self.units = units
        self.settings.set_units(units)
        self.unit_combo.setCurrentIndex(self.unit_combo.findData(units))
        self.unit_actions[units].setChecked(True)
        for page in self.tabs.values():
            page.set_units(units)
        self.workbench.set_units(units)
        self.redraw()

    def _title(self) -> None:
        self.setWindowTitle(f"{self.doc.display_name()}[*] — MemPlan")
        self.setWindowModified(self.doc.dirty)

    # window events -----------------------------------------------------------------
    def changeEvent(self, event: QEvent) -> None:
        """Follow a light/dark switch of the system palette in the charts too."""
        if event.type() == QEvent.Type.PaletteChange:
            for plot in (*self.chart.plots.values(), self.stage_chart.plot):
                style_plot(plot)
            self.redraw()
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
        self.worker.shutdown()
        self.workbench.shutdown()
        event.accept()

    def open_initial(self, path: str | None) -> None:
        """Open the file given on the command line (errors are shown, default stays)."""
        if path:
            self.files.open_file(str(Path(path)), ask=False)
