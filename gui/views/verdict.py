"""The verdict and GPU counts panel: always visible above the results.

It shows only what the Estimate holds today — verdict, peak against limit and capacity,
headroom left — and keeps a place for the GPU counts that the layout search will fill.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QGridLayout, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from engine.estimate import Estimate
from engine.plan import Plan
from engine.units import fmt_bytes, fmt_range

VERDICT_STYLE = {
    "fits": ("FITS", "#1E8E3E"),
    "straddles": ("STRADDLES", "#C77C02"),
    "does_not_fit": ("DOES NOT FIT", "#C5221F"),
}
COUNTS_PENDING = "from the layout search — not in this build yet, so none are shown"


def layout_counts(plan: Plan, est: Estimate) -> dict[str, Any] | None:
    """GPU counts from the layout search, when the engine has one (issue 7).

    The single integration point for the lead: return e.g. ``{"minimum": …,
    "recommended": …, "procurement": …}``; ``None`` shows the pending note instead.
    """
    return None


class VerdictPanel(QFrame):
    """Badge, key figures and counts."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("verdictPanel")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        row = QHBoxLayout(self)
        row.setContentsMargins(10, 8, 10, 8)
        row.setSpacing(16)
        badge_col = QVBoxLayout()
        self.badge = QLabel("…", self)
        self.badge.setObjectName("verdictBadge")
        self.badge.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.badge.setMinimumWidth(150)
        self.stale = QLabel("", self)
        self.stale.setObjectName("staleNote")
        self.stale.setWordWrap(True)
        self.stale.setStyleSheet("color: #C5221F; font-size: 8pt;")
        badge_col.addWidget(self.badge)
        badge_col.addWidget(self.stale)
        badge_col.addStretch(1)
        row.addLayout(badge_col)
        grid = QGridLayout()
        grid.setHorizontalSpacing(10)
        grid.setVerticalSpacing(3)
        self.values: dict[str, QLabel] = {}
        self.names: dict[str, QLabel] = {}
        cells = (("peak", "Peak HBM per rank", 0, 0), ("left", "Left under the limit", 0, 2),
                 ("limit", "Limit", 1, 0), ("world", "Ranks", 1, 2),
                 ("capacity", "Usable capacity", 2, 0), ("counts", "GPU counts", 2, 2))
        for key, title, r, c in cells:
            name = QLabel(title, self)
            name.setStyleSheet("color: palette(placeholder-text);")
            value = QLabel("", self)
            value.setObjectName(f"verdict:{key}")
            value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            value.setWordWrap(True)
            grid.addWidget(name, r, c, Qt.AlignmentFlag.AlignTop)
            grid.addWidget(value, r, c + 1, Qt.AlignmentFlag.AlignTop)
            self.values[key] = value
            self.names[key] = name
        grid.setColumnStretch(1, 3)
        grid.setColumnStretch(3, 2)
        row.addLayout(grid, 1)
        self.counts = self.values["counts"]
        self.counts.setObjectName("gpuCounts")
        self.counts.setText(COUNTS_PENDING)
        self.counts.setStyleSheet("color: palette(placeholder-text); font-size: 8pt;")

    def show_estimate(self, plan: Plan, est: Estimate, units: str) -> None:
        text, color = VERDICT_STYLE[est.verdict]
        self.badge.setText(text)
        self.badge.setStyleSheet(
            f"background: {color}; color: white; font-weight: 700; font-size: 15pt;"
            "border-radius: 6px; padding: 10px 14px;")
        self.badge.setToolTip(est.verdict_reason)
        u: Any = units
        peak = est.peak
        phase = est.heaviest.peak_phase
        where = f" — {phase}" + (f", stage {est.heaviest_stage}" if len(est.stages) > 1 else "")
        self.values["peak"].setText(f"<b>{fmt_range(peak.low, peak.high, u)}</b>{where}")
        self.names["limit"].setText(f"Limit ({plan.policy.headroom_percent:g} % headroom)")
        self.values["limit"].setText(fmt_bytes(est.limit_bytes, u))
        self.values["capacity"].setText(f"{fmt_bytes(est.capacity_bytes, u)} per GPU")
        self.values["capacity"].setToolTip(
            f"{plan.hardware.accelerator}; policy {plan.hardware.usable_policy}")
        left = est.limit_bytes - peak.high
        self.values["left"].setText(
            fmt_bytes(left, u) if left >= 0 else f"over by {fmt_bytes(-left, u)}")
        stages = len(est.stages)
        self.values["world"].setText(
            f"{est.world_size:,}" + (f" · {stages} pipeline stages" if stages > 1 else ""))
        counts = layout_counts(plan, est)
        self.counts.setText(COUNTS_PENDING if counts is None else "<br>".join(
            f"{k}: <b>{v}</b>" for k, v in counts.items()))
        self.set_stale(None)

    def set_stale(self, message: str | None) -> None:
        """Say the figures are from the last valid plan, and why the current one fails."""
        if message:
            self.stale.setText("Showing the last valid estimate: " + message)
            self.badge.setStyleSheet(
                "background: #7f7f7f; color: white; font-weight: 700; font-size: 15pt;"
                "border-radius: 6px; padding: 10px 14px;")
        else:
            self.stale.setText("")
