"""A read-only table of fixed columns: what the Layouts, fit-levers and sweep panels show.

One place for the set-up they share (named for tests and style sheets, column titles, no
row numbers, cells not editable, the last column taking the spare width), so the three
tables cannot drift apart; each keeps its own resize mode (the Layouts and levers tables
size their columns once per fill, the sweep's few columns follow their contents).
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QWidget


def read_only_grid(
    parent: QWidget, name: str, columns: Sequence[str], resize: QHeaderView.ResizeMode
) -> QTableWidget:
    """An empty table with these column titles, its cells not editable."""
    table = QTableWidget(0, len(columns), parent)
    table.setObjectName(name)
    table.setHorizontalHeaderLabels(list(columns))
    table.verticalHeader().setVisible(False)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    header = table.horizontalHeader()
    header.setSectionResizeMode(resize)
    header.setStretchLastSection(True)
    return table
