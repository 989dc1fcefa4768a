"""The ledger table: every row of the estimate, sortable, with formula and source on hover."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QPersistentModelIndex,
    QSortFilterProxyModel,
    Qt,
)
from PySide6.QtGui import QFontMetrics, QResizeEvent
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView, QWidget

from engine.ledger.row import ALL_PHASES, Row
from engine.sources import describe
from engine.units import GB, GiB

COLUMNS = ("Row", "Location", "Group", "Scope", "Phases", "Bytes", "GB", "GiB")
SORT_ROLE = Qt.ItemDataRole.UserRole + 1
_NUMERIC = {"Bytes": 1, "GB": GB, "GiB": GiB}
_ROOT = QModelIndex()
ROW_MIN_WIDTH = 260
"""Narrowest the Row column gets: room for a row's name ("Optimizer: first moment")."""
WIDTH_SAMPLES = (
    "Location",
    "offload (pinned)",
    "per rank · peak",
    "Phases",
    "25,798,010,470 – 27,640,725,504",
    "25.798 – 27.641",
    "24.026 – 25.742",
)
"""The widest text each column after Row holds in practice: the columns are sized from
these once (sizing them to their contents re-measured every cell on every edit)."""
CELL_PADDING = 16
SORT_ARROW = 14
"""Room for the header's sort indicator beside its title."""
BYTES = COLUMNS.index("Bytes")
ROW_NARROW_WIDTH = 170
"""The Row column's narrowest on a small screen (names elide): at 1366 × 768 it gives
way down to this so the Bytes column is shown whole, the GB/GiB columns scrolled to."""
_PHASE_SHORT = {"steady": "S", "forward": "F", "backward": "B", "optimizer": "O", "checkpoint": "C"}


def _amount(row: Row, scale: int) -> str:
    if scale == 1:
        return f"{row.low:,}" if row.exact else f"{row.low:,} – {row.high:,}"
    if row.exact:
        return f"{row.low / scale:,.3f}"
    return f"{row.low / scale:,.3f} – {row.high / scale:,.3f}"


class LedgerModel(QAbstractTableModel):
    """Rows of one Estimate (the rank that decides fit)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.rows: tuple[Row, ...] = ()

    def set_rows(self, rows: tuple[Row, ...]) -> None:
        """Show ``rows``. The same rows (by id, in order) with new figures — what most
        edits make — update only the cells that moved, so the view keeps its scroll
        position and selection and repaints little; other rows reset the model."""
        old = self.rows
        if [r.id for r in old] != [r.id for r in rows]:
            self.beginResetModel()
            self.rows = rows
            self.endResetModel()
            return
        self.rows = rows
        moved = [i for i, (a, b) in enumerate(zip(old, rows, strict=True)) if a != b]
        if moved:
            last = len(COLUMNS) - 1
            self.dataChanged.emit(self.index(moved[0], 0), self.index(moved[-1], last))

    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = _ROOT) -> int:
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: QModelIndex | QPersistentModelIndex = _ROOT) -> int:
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        return None

    def data(
        self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if not index.isValid():
            return None
        row, col = self.rows[index.row()], COLUMNS[index.column()]
        if role == Qt.ItemDataRole.DisplayRole:
            return self._text(row, col)
        if role == SORT_ROLE:
            return row.low if col in _NUMERIC else self._text(row, col)
        if role == Qt.ItemDataRole.ToolTipRole:
            return (
                f"<b>{row.label}</b> <code>{row.id}</code><br><b>Formula:</b> "
                f"{row.formula}<br><b>Source:</b> {describe(row.source)}"
                + ("" if row.exact else "<br>Range: low – high")
            )
        if role == Qt.ItemDataRole.TextAlignmentRole and col in _NUMERIC:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    @staticmethod
    def _text(row: Row, col: str) -> str:
        if col == "Row":
            return row.label
        if col == "Location":
            return {"hbm": "HBM", "host": "Host RAM", "nvme": "NVMe"}.get(
                row.location, row.location
            )
        if col == "Group":
            return row.group
        if col == "Scope":
            return f"per {row.scope}" + ("" if row.kind == "persistent" else f" · {row.kind}")
        if col == "Phases":
            return (
                "all"
                if row.phases == ALL_PHASES
                else "".join(_PHASE_SHORT[p] for p in _PHASE_SHORT if p in row.phases)
            )
        return _amount(row, _NUMERIC[col])


class LedgerTable(QTableView):
    """Sortable view of the ledger; GB/GiB columns follow the units preference."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ledger = LedgerModel(self)
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.ledger)
        self.proxy.setSortRole(SORT_ROLE)
        self.setModel(self.proxy)
        self.setSortingEnabled(True)
        self.sortByColumn(-1, Qt.SortOrder.AscendingOrder)
        self.setAlternatingRowColors(True)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.verticalHeader().setVisible(False)
        self.verticalHeader().setDefaultSectionSize(22)
        head = self.horizontalHeader()
        for col in range(len(COLUMNS)):
            head.setSectionResizeMode(col, QHeaderView.ResizeMode.Interactive)
        metrics = self.fontMetrics()
        for col, sample in enumerate(WIDTH_SAMPLES, start=1):
            head.resizeSection(col, metrics.horizontalAdvance(sample) + CELL_PADDING)
        head.sectionResized.connect(self._section_resized)
        self._units = ""

    def show_rows(self, rows: tuple[Row, ...]) -> None:
        self.ledger.set_rows(rows)
        self._fit_to_content(rows)
        self._fit_row_column()

    def _fit_to_content(self, rows: tuple[Row, ...]) -> None:
        """Columns after Row as wide as their widest text in these rows (or their header):
        the samples' widths left an 8B plan's Location and Phases columns twice too wide,
        pushing Bytes past a 1366-px screen's edge. A few dozen rows × seven texts are
        measured, not every cell's delegate (which is what made ``ResizeToContents`` slow)."""
        head, metrics = self.horizontalHeader(), self.fontMetrics()
        bold = QFontMetrics(head.font())
        for col, name in enumerate(COLUMNS[1:], start=1):
            texts = [LedgerModel._text(r, name) for r in rows]
            widest = max((metrics.horizontalAdvance(t) for t in texts), default=0)
            width = max(widest, bold.horizontalAdvance(name) + SORT_ARROW) + CELL_PADDING
            if head.sectionSize(col) != width:
                head.resizeSection(col, width)

    def _section_resized(self, index: int, _old: int, _new: int) -> None:
        if index:
            self._fit_row_column()

    def _fit_row_column(self) -> None:
        """The Row column takes the width the others leave, but never less than
        :data:`ROW_MIN_WIDTH` (a narrow window scrolls sideways instead of eliding every
        row's name to "Wei…")."""
        head = self.horizontalHeader()
        shown = [c for c in range(1, len(COLUMNS)) if not head.isSectionHidden(c)]
        others = sum(head.sectionSize(c) for c in shown)
        room = self.viewport().width()
        width = room - others
        if width < ROW_MIN_WIDTH:  # narrow: the Row column gives way so Bytes is whole
            through_bytes = sum(head.sectionSize(c) for c in shown if c <= BYTES)
            width = min(ROW_MIN_WIDTH, max(ROW_NARROW_WIDTH, room - through_bytes))
        if head.sectionSize(0) != width:
            head.resizeSection(0, width)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit_row_column()

    def set_units(self, units: str) -> None:
        if units == self._units:
            return
        self._units = units
        self.setColumnHidden(COLUMNS.index("GB"), units == "gib")
        self.setColumnHidden(COLUMNS.index("GiB"), units == "gb")
        self._fit_row_column()
