"""The Layouts tab's "Fit levers" table: each lever with the GPUs it would need against
the plan's own, the layout behind that count, its cost in words, and Apply.

The levers are searched by the window's worker process (their summaries arrive after
the counts: they cost the most); the table only formats them (``gui.views.lever_rows``,
the same rows the report prints). Apply sets the lever's changes — all of them, nothing
else — as one undoable edit (``PlanDocument.set_many``), like an alternative layout's
Apply; a lever the stack cannot run shows why and offers no Apply.
"""

from __future__ import annotations

from PySide6.QtWidgets import (
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from engine.layout.levers import LeverSummary
from gui.document import PlanDocument
from gui.views.grid import read_only_grid
from gui.views.lever_rows import INTRO, LeverRow, levers_status

COLUMNS = ("", "Lever and its change", "GPUs to buy with it", "Arithmetic minimum", "Cost")
COUNT_COLUMNS = (2, 2)
"""Where a lever's counts go (first column, how many): one cell saying why, when the
stack cannot run it."""
COLUMN_MAX = (70, 190, 190, 130)
"""Widest each column but the last may be sized to its contents, in pixels: longer text
wraps, so the cost (a sentence, in the last column, which takes the width that is left)
stays readable in the Layouts tab of a 1366-pixel-wide window."""


def fit_height(table: QTableWidget, rows: int) -> None:
    """Tall enough for every row: the tab scrolls as a whole, not a table inside it."""
    body = sum(table.rowHeight(i) for i in range(rows))
    header = table.horizontalHeader().sizeHint().height()
    scroll = table.horizontalScrollBar().sizeHint().height()
    table.setFixedHeight(body + header + scroll + 2 * table.frameWidth() + 2)


class LeversTable(QWidget):
    """The fit levers of the plan on screen, or why there are none to show yet."""

    def __init__(self, doc: PlanDocument, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("leversTable")
        self.doc = doc
        self.rows: tuple[LeverRow, ...] = ()
        self.apply_buttons: list[QPushButton] = []
        col = QVBoxLayout(self)
        col.setContentsMargins(0, 0, 0, 0)
        self.title = QLabel("<b>Fit levers</b>", self)
        self.status = QLabel("", self)
        self.status.setObjectName("leversStatus")
        self.status.setWordWrap(True)
        self.table = read_only_grid(self, "leversGrid", COLUMNS, QHeaderView.ResizeMode.Interactive)
        self.table.setWordWrap(True)
        # Tab leaves the table for the next Apply button instead of walking its cells
        self.table.setTabKeyNavigation(False)
        self.table.horizontalHeader().setMinimumSectionSize(40)
        # the cost column stretches with the tab: its words wrap again, rows re-measured
        self.table.horizontalHeader().sectionResized.connect(self._rewrap)
        for w in (self.title, self.status, self.table):
            col.addWidget(w)
        self.show_levers(None, None)

    def show_levers(self, levers: object, counts: object) -> None:
        """Redraw from the levers part (summaries, a PlanError, or None while pending)
        and the counts part they are set against."""
        got = levers_status(levers, counts)
        if isinstance(got, str):
            self.rows = ()
            self.status.setText(got)
        else:
            self.rows = got
            self.status.setText(INTRO)
        self._fill()

    def _fill(self) -> None:
        self.table.clearSpans()
        self.table.setRowCount(len(self.rows))
        self.apply_buttons = []
        for i, r in enumerate(self.rows):
            if r.runnable:
                button = QPushButton("Apply", self.table)
                button.setToolTip(f"Set {r.change} (one undoable edit)")
                button.clicked.connect(lambda _c=False, lv=r.lever: self.apply(lv))
                self.table.setCellWidget(i, 0, button)
                self.apply_buttons.append(button)
            else:
                first, span = COUNT_COLUMNS
                self.table.setSpan(i, first, 1, span)
            gpus = f"{r.gpus}\n{r.layout}" if r.layout else r.gpus
            cells = (f"{r.name}\n{r.change}", gpus, r.minimum, r.lever.cost)
            for c, text in enumerate(cells, start=1):
                item = QTableWidgetItem(text)
                why = r.lever.reason if c == COUNT_COLUMNS[0] and r.runnable else ""
                item.setToolTip(why or text)
                self.table.setItem(i, c, item)
        self.table.setVisible(bool(self.rows))
        if self.rows:
            self._size()

    def _size(self) -> None:
        """Columns to their contents up to :data:`COLUMN_MAX` (longer text wraps), then
        rows to their wrapped text, and the table to its rows."""
        t = self.table
        t.resizeColumnsToContents()
        for c, widest in enumerate(COLUMN_MAX):
            t.setColumnWidth(c, min(t.columnWidth(c), widest))
        self._rewrap()

    def _rewrap(self, *_: object) -> None:
        self.table.resizeRowsToContents()
        fit_height(self.table, len(self.rows))

    def apply(self, lever: LeverSummary) -> bool:
        """Set the plan to ``lever``'s changes as one undo step (True when it changed)."""
        return self.doc.set_many(dict(lever.changes), f"Apply fit lever: {lever.name}")
