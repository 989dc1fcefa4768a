"""The Diagnostics list: errors and notes, the verdict, what fits the layout, the rows
that dominate the peak and the one-change suggestions (double-click applies one).

A view like the others: it formats what it is handed (the document's state and the parts
of the plan's analysis that have arrived from the worker) and never computes; a part
not yet arrived shows as pending.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QListWidget, QListWidgetItem, QWidget

from engine.analysis import FitLimits
from engine.errors import PlanError
from engine.units import fmt_bytes, fmt_range
from engine.whatif.diagnostics import Diagnosis
from engine.workload import compile_note
from gui.document import PlanDocument

DIAGNOSIS_PENDING = "Re-estimating one-change suggestions…"


class DiagnosticsList(QListWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("diagnostics")
        self.setWordWrap(True)
        self.setToolTip("Double-click a suggestion to apply it (Edit → Undo takes it back).")

    def show_document(self, doc: PlanDocument, parts: Mapping[str, object], units: str) -> None:
        """Redraw from the document and the analysis parts computed for its estimate."""
        self.clear()
        if doc.estimate_error:
            self.addItem(f"Error — cannot compute this plan: {doc.estimate_error}")
        for message in doc.messages:
            self.addItem(f"Note — {message}")
        if doc.estimate is None or doc.estimate_error:
            return
        self.addItem(f"Verdict: {doc.estimate.verdict_reason}")
        for note in doc.estimate.notes:
            self.addItem(f"Note — {note}")
        compiled = compile_note(doc.plan)
        if compiled:
            self.addItem(f"Note — {compiled}")
        fit = parts.get("fit")
        if isinstance(fit, FitLimits):
            for title, r in (
                ("largest micro-batch", fit.micro_batch),
                ("longest sequence", fit.sequence),
            ):
                item = QListWidgetItem(f"Fit — {title} on this layout: {r.answer}")
                item.setToolTip(f"{r.reason}; searched {r.searched}")
                self.addItem(item)
        d = parts.get("diagnosis")
        if isinstance(d, PlanError):
            self.addItem(f"Suggestions unavailable: {d}")
        elif isinstance(d, Diagnosis):
            self._diagnosis(d, units)
        else:
            self.addItem(DIAGNOSIS_PENDING)

    def _diagnosis(self, d: Diagnosis, units: str) -> None:
        u: Any = units
        for dom in d.dominant:
            self.addItem(
                f"Dominant — {dom.row.label}: {fmt_range(dom.row.low, dom.row.high, u)} "
                f"({dom.share:.0%} of the peak)"
            )
        for sug in d.suggestions:
            fits = " — then fits" if sug.fits else ""
            item = QListWidgetItem(
                f"Suggestion — {sug.label}: saves {fmt_bytes(sug.saves or 0, u)}{fits}"
            )
            item.setData(Qt.ItemDataRole.UserRole, sug.changes)
            item.setToolTip(", ".join(f"{k} = {v}" for k, v in sug.changes.items()))
            self.addItem(item)


def suggestion_of(item: QListWidgetItem) -> tuple[dict[str, Any], str] | None:
    """The changes a suggestion item carries and its undo text (None: not a suggestion)."""
    changes = item.data(Qt.ItemDataRole.UserRole)
    if isinstance(changes, dict) and changes:
        return changes, item.text().split(":")[0].removeprefix("Suggestion — ")
    return None
