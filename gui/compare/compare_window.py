"""The Compare window: two or more plans side by side.

Opened from File → Compare with Saved Version (the file on disk against the edits on
screen) or Compare with File… (the plan on screen against other files); more files can
be added, and any plan but the last two removed. The comparison (each plan's estimate
and GPU counts, a layout search each) runs on a worker with progress and Cancel; then
the window shows the figures side by side (the same words as ``memplan compare``) above
three tabs: the chart of :mod:`gui.compare.compare_chart`, the ledger rows that differ (matched
by row id, with low/high deltas against the first plan) and the inputs that differ.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeyEvent, QKeySequence, QResizeEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from engine.plan import Plan
from engine.planfile import PlanFileError, load
from engine.units import fmt_range
from engine.whatif.compare import (
    SUMMARY_FIGURES,
    Comparison,
    compare,
    delta_text,
    show_input,
    summary,
)
from gui import dialogs
from gui.compare.compare_chart import ComparisonChart
from gui.workers.workers import TaskRunner

WINDOW_SIZE = (1180, 720)
"""Opening size on a large screen; a smaller screen gets 92 % of its free area."""
SCREEN_SHARE = 0.92


def _table(parent: QWidget, name: str) -> QTableWidget:
    t = QTableWidget(0, 0, parent)
    t.setObjectName(name)
    t.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
    t.setWordWrap(False)
    t.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    return t


def _fill(
    t: QTableWidget, headers: list[str], rows: list[list[str]], vertical: bool = False
) -> None:
    t.clear()
    t.setColumnCount(len(headers) - (1 if vertical else 0))
    t.setRowCount(len(rows))
    if vertical:  # the first cell of each row is its header
        t.setHorizontalHeaderLabels(headers[1:])
        t.setVerticalHeaderLabels([r[0] for r in rows])
        rows = [r[1:] for r in rows]
    else:
        t.setHorizontalHeaderLabels(headers)
        t.verticalHeader().setVisible(False)
    for i, cells in enumerate(rows):
        for j, text in enumerate(cells):
            item = QTableWidgetItem(text)
            item.setToolTip(text)
            t.setItem(i, j, item)


class CompareWindow(QWidget):
    """Plans side by side; ``plans`` are (name, Plan), the first the baseline."""

    def __init__(
        self, plans: list[tuple[str, Plan]], units: str, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent, Qt.WindowType.Window)
        self.setObjectName("compareWindow")
        self.setWindowTitle("Compare plans — MemPlan")
        screen = (parent.screen() if parent is not None else self.screen()).availableGeometry()
        self.resize(
            min(WINDOW_SIZE[0], int(screen.width() * SCREEN_SHARE)),
            min(WINDOW_SIZE[1], int(screen.height() * SCREEN_SHARE)),
        )
        self.plans = list(plans)
        self.units = units
        self.result: Comparison | None = None
        self._searching = False  # the second pass (with the GPU counts) is running
        self.runner = TaskRunner(self)
        self.runner.progress.connect(self._progress)
        self.runner.finished.connect(self._finished)
        self.runner.failed.connect(lambda m: self._say(f"The comparison failed: {m}", True))
        self._build()
        self.run()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        """Escape and Ctrl+W close the window, as the main window's dialogs close."""
        if event.key() == Qt.Key.Key_Escape or event.matches(QKeySequence.StandardKey.Close):
            self.close()
            return
        super().keyPressEvent(event)

    def _build(self) -> None:
        self.add_button = QPushButton("&Add plan file…", self)
        self.add_button.clicked.connect(lambda _c=False: self.ask_add())
        self.remove_button = QPushButton("&Remove last plan", self)
        self.remove_button.clicked.connect(self.remove_last)
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.clicked.connect(self.runner.cancel)
        self.progress = QProgressBar(self)
        self.progress.setObjectName("compareProgress")
        self.progress.setMaximumWidth(180)
        self.include = QCheckBox("Include in the report", self)
        self.include.setToolTip("File → Export Report adds this comparison as an appendix")
        self.status = QLabel("", self)
        self.status.setObjectName("compareStatus")
        self.status.setWordWrap(True)
        bar = QHBoxLayout()
        for w in (self.add_button, self.remove_button, self.progress, self.cancel_button):
            bar.addWidget(w)
        bar.addWidget(self.status, 1)
        bar.addWidget(self.include)
        self.summary = _table(self, "compareSummary")
        self.summary.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        # A long figure ("4 GPUs: a partial node (4 of 8 per node; below one node …")
        # wraps in its row rather than end in "…" (its tooltip has it too).
        self.summary.setWordWrap(True)
        self.summary.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.chart = ComparisonChart(self)
        self.rows = _table(self, "compareRows")
        self.inputs = _table(self, "compareInputs")
        self.details = QTabWidget(self)
        self.details.addTab(self.chart, "Chart")
        self.details.addTab(self.rows, "Rows that differ")
        self.details.addTab(self.inputs, "Inputs that differ")
        self.split = split = QSplitter(Qt.Orientation.Vertical, self)
        split.addWidget(self.summary)
        split.addWidget(self.details)
        split.setStretchFactor(0, 2)
        split.setStretchFactor(1, 3)
        self._split_moved = False  # the user dragged it: the window leaves it there
        split.splitterMoved.connect(lambda *_: setattr(self, "_split_moved", True))
        col = QVBoxLayout(self)
        col.setContentsMargins(6, 6, 6, 6)
        col.addLayout(bar)
        col.addWidget(split, 1)

    def fit_summary(self) -> None:
        """Give the figures the height of all their rows, as far as the tabs under them
        keep their minimum. With the splitter's 2 : 3 share alone, at 1366×768 and at
        1920×1080 the figures showed 7½ rows: the last row on screen ("Procure", the
        longest text) was cut across the middle."""
        if self._split_moved:
            return
        total = sum(self.split.sizes())
        if total <= 0:
            return
        table = self.summary
        table.doItemsLayout()  # the header and column widths now, not at the next
        table.resizeRowsToContents()  # layout: a row's wrapped height follows them
        need = table.horizontalHeader().height() + table.verticalHeader().length()
        need += 2 * table.frameWidth()
        top = max(0, min(need, total - self.details.minimumSizeHint().height()))
        self.split.setSizes([top, total - top])

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self.fit_summary()

    # plans -------------------------------------------------------------------------
    def add_plan(self, name: str, plan: Plan) -> None:
        self.plans.append((name, plan))
        self.run()

    def add_file(self, path: str) -> bool:
        try:
            pf = load(path)
        except PlanFileError as exc:
            dialogs.show_error(self, "Cannot add the plan", f"{path}: {exc}")
            return False
        self.add_plan(path.rsplit("/", 1)[-1], pf.plan)
        return True

    def ask_add(self) -> None:
        paths, _ = QFileDialog.getOpenFileNames(self, "Add plans", "", "MemPlan plans (*.memplan)")
        for path in paths:
            self.add_file(path)

    def remove_last(self) -> None:
        if len(self.plans) > 2:
            self.plans.pop()
            self.run()

    # computing ---------------------------------------------------------------------
    def run(self) -> None:
        """Compare the plans on the worker: first their estimates (fast, shown at once),
        then with their GPU counts (a layout search each: seconds for a large model)."""
        plans = list(self.plans)
        self.remove_button.setEnabled(len(plans) > 2)
        self.progress.setRange(0, len(plans))
        self.progress.setValue(0)
        self.progress.setVisible(True)
        self.cancel_button.setEnabled(True)
        self._say(f"Comparing {len(plans)} plans…")
        self._searching = False
        self.runner.start(lambda progress: compare(plans, with_counts=False, progress=progress))

    def _progress(self, done: int, total: int) -> None:
        self.progress.setRange(0, total)
        self.progress.setValue(done)

    def _finished(self, result: object) -> None:
        if not isinstance(result, Comparison):
            return
        if self._searching and result.cancelled and self.result is not None:
            self.progress.setVisible(False)  # keep the comparison without counts
            self.cancel_button.setEnabled(False)
            self._say("GPU-count search cancelled; the figures without counts stay.")
            return
        self.result = result
        self.show_result(result)
        if not self._searching and not result.cancelled:
            self._searching = True
            plans = [(s.name, s.plan) for s in result.sides]
            self._say("Searching layouts for each plan's GPU counts…")
            self.progress.setValue(0)
            self.runner.start(lambda progress: compare(plans, progress=progress))
            return
        self.progress.setVisible(False)
        self.cancel_button.setEnabled(False)
        done = "Cancelled: the plans compared so far. " if result.cancelled else ""
        self._say(f"{done}Deltas are against {result.sides[0].name}.")

    def _say(self, text: str, error: bool = False) -> None:
        self.status.setText(text)
        self.status.setStyleSheet("color: #C5221F;" if error else "")

    # showing -----------------------------------------------------------------------
    def show_result(self, c: Comparison) -> None:
        u: Any = self.units
        names = [s.name for s in c.sides]
        sums = [summary(s, u) for s in c.sides]
        _fill(
            self.summary, ["", *names], [[k, *(s[k] for s in sums)] for k in SUMMARY_FIGURES], True
        )
        self.fit_summary()
        self.chart.show_comparison(c, self.units)
        rows = []
        for r in c.changed_rows:
            cells = [r.id, r.location]
            cells += ["absent" if v is None else fmt_range(v[0], v[1], u) for v in r.values]
            cells += [
                delta_text(r, i, "gib" if self.units == "gib" else "gb")
                for i in range(1, len(names))
            ]
            rows.append(cells)
        deltas = [f"Δ {n} (low / high)" for n in names[1:]]
        _fill(self.rows, ["Row", "Where", *names, *deltas], rows)
        self.details.setTabText(1, f"Rows that differ ({len(rows)} of {len(c.rows)})")
        inputs = [[d.path, *(show_input(v) for v in d.values)] for d in c.inputs]
        _fill(self.inputs, ["Field", *names], inputs)
        self.details.setTabText(2, f"Inputs that differ ({len(inputs)})")

    def set_units(self, units: str) -> None:
        self.units = units
        if self.result is not None:
            self.show_result(self.result)

    def for_report(self, config_hash: str) -> Comparison | None:
        """The comparison to include in a report of plan ``config_hash``: asked for, and
        one of its plans is that plan (else it would compare something else)."""
        c = self.result
        if c is None or not self.include.isChecked() or config_hash not in c.hashes:
            return None
        return c

    def closeEvent(self, event: Any) -> None:
        self.runner.shutdown()
        super().closeEvent(event)
