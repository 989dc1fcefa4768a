"""The Layouts tab: the three GPU counts with their reasons, the chosen layout, the
ranked alternatives with Apply, the fit levers with Apply (:mod:`gui.views.levers_table`),
the rejected layouts that apply to this model, and the topology of the chosen layout.

A view like the others: it formats the counts the window's worker computed through
``engine.analysis`` (the tab never searches) and the estimate on screen, with the
choice rule of :mod:`gui.views.layout_choice` — when the plan's own layout fits it is
the chosen one, so the tab never contradicts the plan. Apply sets a layout's parallel
sizes and batch geometry as one undoable edit (``PlanDocument.set_many``).
"""

from __future__ import annotations

from html import escape

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QPainter, QPaintEvent
from PySide6.QtWidgets import (
    QHeaderView,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QScrollArea,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from engine.errors import PlanError
from engine.layout.counts import GpuCounts
from engine.layout.point import PREFERENCES_TITLE, RULES_TITLE, batch_change, grouped, step_words
from engine.layout.shapes import Layout, ranks_per_node
from engine.units import UnitChoice, fmt_bytes, fmt_range
from gui.document import PlanDocument
from gui.views.chart_common import foreground
from gui.views.grid import read_only_grid
from gui.views.layout_choice import (
    ROLE_WORDS,
    LayoutChoice,
    LayoutRow,
    choose,
    layout_changes,
    validation_text,
)
from gui.views.levers_table import LeversTable, fit_height
from gui.views.topology import Topology, draw_topology, topology, topology_height

COLUMNS = (
    "",
    "Layout",
    "Ranks",
    "GPUs to buy",
    "Global batch (tokens/step)",
    "Peak per rank (low–high)",
    "Headroom",
    "Role",
)
PENDING = "Searching layouts… (the counts arrive from a background search)"
REJECTIONS_LISTED = 200
"""Rejected layouts listed one per line; the title counts them all. A large model's
search rejects thousands (DeepSeek-V3: ~1,500), and listing every one cost the GUI
thread ~15 ms each time the counts arrived, for a list nobody reads to its end."""


class TopologyView(QWidget):
    """The topology diagram of one layout (empty until one is shown)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("topologyView")
        self.topo: Topology | None = None

    def show_topology(self, t: Topology | None) -> None:
        self.topo = t
        self.setMinimumHeight(int(topology_height(t)) if t else 0)
        self.updateGeometry()
        self.update()

    def sizeHint(self) -> QSize:
        return QSize(600, int(topology_height(self.topo)) if self.topo else 0)

    def paintEvent(self, event: QPaintEvent) -> None:
        if self.topo is None:
            return
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        draw_topology(painter, QRectF(self.rect()).adjusted(4, 2, -4, -2), self.topo, foreground())
        painter.end()


class LayoutsView(QScrollArea):
    """Counts, chosen layout, alternatives (Apply), fit levers (Apply), relevant
    rejections, topology."""

    def __init__(self, doc: PlanDocument, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("layoutsView")
        self.doc = doc
        self.units = "both"
        self.choice: LayoutChoice | None = None
        self.setWidgetResizable(True)
        body = QWidget(self)
        col = QVBoxLayout(body)
        col.setContentsMargins(6, 6, 6, 6)
        self.counts = QLabel(PENDING, body)
        self.counts.setObjectName("layoutCounts")
        self.counts.setWordWrap(True)
        self.note = QLabel("", body)
        self.note.setObjectName("layoutNote")
        self.note.setWordWrap(True)
        # sized once per fill (resizeColumnsToContents), not on every cell set: a
        # ResizeToContents header re-measures the table for each of its cell widgets
        self.table = read_only_grid(
            body, "layoutTable", COLUMNS, QHeaderView.ResizeMode.Interactive
        )
        self.levers = LeversTable(doc, body)
        self.rejected_title = QLabel("", body)
        self.rejected_title.setWordWrap(True)
        self.rejected = QListWidget(body)
        self.rejected.setObjectName("layoutRejected")
        self.rejected.setMaximumHeight(140)
        self.topology = TopologyView(body)
        shown: tuple[QWidget, ...] = (self.counts, self.note, self.table, self.levers)
        for w in (*shown, self.rejected_title, self.rejected):
            col.addWidget(w)
        col.addWidget(QLabel("<b>Topology of the chosen layout</b>", body))
        col.addWidget(self.topology)
        col.addStretch(1)
        self.setWidget(body)
        self.apply_buttons: list[QPushButton] = []

    def show_counts(self, counts: object, units: str, levers: object = None) -> None:
        """Redraw from the counts part (GpuCounts, a PlanError, or None while pending)
        and the fit levers' part (see :meth:`show_levers`)."""
        self.units = units
        est = self.doc.estimate
        if isinstance(counts, PlanError):
            self._clear(f"The layout search is unavailable: {escape(str(counts))}")
        elif not isinstance(counts, GpuCounts) or est is None or self.doc.stale:
            self._clear(PENDING)
        else:
            self.choice = choose(self.doc.plan, est, counts)
            self._show(counts, self.choice)
        self.show_levers(levers, counts)

    def show_levers(self, levers: object, counts: object) -> None:
        """Redraw the fit levers from their part (summaries, a PlanError, or None while
        pending), set against the counts part; pending while the plan on screen is."""
        if self.doc.estimate is None or self.doc.stale:
            levers = None
        self.levers.show_levers(levers, counts)

    def _clear(self, text: str) -> None:
        self.choice = None
        self.counts.setText(text)
        self.note.setText("")
        self.table.setRowCount(0)
        self.apply_buttons = []
        self.rejected_title.setText("")
        self.rejected.clear()
        self.topology.show_topology(None)

    def _show(self, k: GpuCounts, choice: LayoutChoice) -> None:
        def gpus(n: int | None) -> str:
            return "none found" if n is None else f"{n:,} GPU{'s' * (n != 1)}"

        items = (
            ("1. Arithmetic minimum", gpus(k.arithmetic_min.gpus), k.arithmetic_min.reason),
            (
                "2. Procure (first legal layout)",
                (k.shape if k.nodes else gpus(None)),
                k.first_layout.reason,
            ),
            ("3. Validation range", validation_text(k), k.validation_reason),
        )
        self.counts.setText(
            "".join(
                f"<p><b>{escape(t)}: {escape(v)}</b><br><small>{escape(why)}</small></p>"
                for t, v, why in items
            )
        )
        chosen = choice.chosen
        head = f"<b>Chosen layout: {escape(chosen.layout.label())}</b> — " if chosen else ""
        self.note.setText(head + escape(choice.note))
        self._rows(choice.rows)
        shown = len(choice.rejected)
        hidden = f"; {choice.why_hidden}" if choice.hidden_rejections else ""
        size = k.first_layout.gpus
        at = f"of {size:,} GPU{'s' * (size != 1)} (the procurement size)" if size else ""
        self.rejected_title.setText(
            f"<b>{shown:,} layout{'s' * (shown != 1)} {at} rejected</b>{escape(hidden)}"
        )
        self.rejected.clear()
        listed = 0
        for title, group in zip(
            (RULES_TITLE, PREFERENCES_TITLE), grouped(choice.rejected), strict=True
        ):
            if not group:
                continue
            header = QListWidgetItem(f"{title}: {len(group):,}")  # rules apart from preferences
            header.setFlags(Qt.ItemFlag.NoItemFlags)
            font = header.font()
            font.setBold(True)
            header.setFont(font)
            self.rejected.addItem(header)
            for r in group[: max(0, REJECTIONS_LISTED - listed)]:
                self.rejected.addItem(f"  {r.layout.label()}: {'; '.join(r.reasons)}")
            listed += len(group)
        if shown > REJECTIONS_LISTED:
            self.rejected.addItem(f"… and {shown - REJECTIONS_LISTED:,} more, not listed")
        self.rejected.setVisible(shown > 0)
        plan = self.doc.plan
        self.topology.show_topology(
            topology(chosen.layout, ranks_per_node(plan), plan.parallelism.strategy)
            if chosen
            else None
        )

    def _rows(self, rows: tuple[LayoutRow, ...]) -> None:
        u: UnitChoice = "gib" if self.units == "gib" else "gb"
        self.table.setRowCount(len(rows))
        self.apply_buttons = []
        own = next((r for r in rows if r.role == "plan"), None)
        for i, r in enumerate(rows):
            button = QPushButton("Current" if r.role == "plan" else "Apply", self.table)
            button.setEnabled(r.role != "plan")
            moved = batch_change(self.doc.plan, r.layout.global_batch)
            button.setToolTip(
                "The plan has this layout"
                if r.role == "plan"
                else f"Set the plan to {r.layout.label()} (one undoable edit)"
                + (f"; it {moved}" if moved else "")
            )
            button.clicked.connect(lambda _c=False, lay=r.layout: self.apply(lay))
            self.table.setCellWidget(i, 0, button)
            self.apply_buttons.append(button)
            headroom = (
                fmt_bytes(r.headroom, u) if r.fits else f"over by {fmt_bytes(-r.headroom, u)}"
            )
            role = ROLE_WORDS[r.role] + (f" #{r.rank}" if r.rank else "")
            if own is not None and r is not own and r.gpus != own.gpus:
                role += f" ({r.gpus - own.gpus:+,} GPUs)"
            cells = [
                r.layout.label(),
                f"{r.layout.world_size:,}",
                f"{r.gpus:,}",
                step_words(r.layout.global_batch, self.doc.plan.batch.seq_len)
                + (" — changes the plan's" if moved else ""),
                fmt_range(r.low, r.high, u),
                headroom,
                role,
            ]
            for c, text in enumerate(cells, start=1):
                item = QTableWidgetItem(text)
                item.setToolTip(f"This layout {moved}" if c == 4 and moved else text)
                self.table.setItem(i, c, item)
        self.table.resizeColumnsToContents()
        fit_height(self.table, len(rows))

    def apply(self, layout: Layout) -> bool:
        """Set the plan to ``layout`` as one undo step (True when the plan changed)."""
        changes = layout_changes(self.doc.plan, layout)
        if not changes:
            return False
        return self.doc.set_many(changes, f"Apply layout {layout.label()}")
