"""The verdict and GPU counts panel: always visible above the results.

It shows the verdict, the peak that decides fit (live tensors plus the fragmentation the
allocator cannot release plus what lives outside PyTorch, :func:`engine.verdict.fit_parts`;
reserved beside it) against the limit and capacity, the headroom left, and the three GPU
counts of the layout search (arithmetic minimum, node-rounded procurement count,
validation range) with their reasons on hover. The panel never searches: the window
hands it the counts ``engine.analysis`` computed on a worker thread.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QGridLayout, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from engine.estimate import VERDICT_WORDS, Estimate
from engine.layout import GpuCounts
from engine.layout.shapes import Layout
from engine.plan import Plan
from engine.units import fmt_bytes, fmt_range
from engine.verdict import fit_parts
from gui.views.colors import VERDICT_COLORS
from gui.views.layout_choice import validation_text

NBSP = "\u00a0"
"""Keeps a figure and its unit together ("59.13 GB"): a narrow panel wraps at " / "."""


def peak_tooltip(est: Estimate, units: Any) -> str:
    """The fit peak in its parts (what the verdict adds up) and the allocator's figures
    beside it: reserved is shown, but its releasable cache does not decide fit."""
    st = est.heaviest
    parts = fit_parts(st.totals)

    def rng(pair: tuple[int, int]) -> str:
        return fmt_range(pair[0], pair[1], units)

    return (
        f"What must fit, on the heaviest rank: live tensors {rng(parts.live)}\n"
        f"+ fragmentation the allocator cannot release {rng(parts.fragmentation)}\n"
        f"+ memory outside PyTorch (NCCL, CUDA context) {rng(parts.outside)}\n"
        f"reserved (allocator): {rng((st.reserved_peak.low, st.reserved_peak.high))} — its "
        "cached free blocks are released before an out-of-memory\n"
        f"on the device (with CUDA context, NCCL): "
        f"{rng((st.device_peak.low, st.device_peak.high))}"
        + (f"\ndecided by: {est.decided_by}" if est.decided_by else "")
    )


BADGE_MAX_WIDTH = 170
"""The verdict badge's widest: two lines of 14 pt for the longest verdict."""

COUNTS_PENDING = "no layout of this model fits within the search bound"
COUNTS_UPDATING = "searching layouts…"


def compact_shape(layout: Layout) -> str:
    """A layout by its parallel sizes above 1 ("TP2 DP16"; "DP1" for a single GPU)."""
    sizes = (("TP", layout.tp), ("PP", layout.pp), ("CP", layout.cp), ("EP", layout.ep))
    parts = [f"{name}{n}" for name, n in sizes if n > 1]
    return " ".join([*parts, f"DP{layout.dp}"])


def layout_counts(c: GpuCounts) -> tuple[dict[str, str], str] | None:
    """The three GPU counts as short texts, and their reasons (for the tooltip).

    ``None`` when the search found nothing that fits (the reason is then the pending
    note); the search treats the estimate as a black box, so it never invents a count.
    """
    if c.first_layout.gpus is None:
        return None
    rng = validation_text(c)
    nodes = c.nodes
    got, per = c.first_layout.gpus, c.gpus_per_node
    where = (
        ("single GPU" if got == 1 else "partial node")
        if got is not None and got < per
        else (f"{nodes} node" + ("s" if nodes != 1 else "") if nodes else "")
    )
    layout = c.first_layout.layout
    exact = layout is not None and layout.world_size == c.first_layout.gpus
    shape = f": {compact_shape(layout)}" if exact and layout is not None else ""
    texts = {
        "arithmetic minimum": f"{c.arithmetic_min.gpus}",
        "procure": f"{c.first_layout.gpus}" + (f" ({where}{shape})" if where else ""),
        "validation range": rng,
    }
    reasons = "\n\n".join(
        (
            f"Arithmetic minimum: {c.arithmetic_min.reason}",
            f"First legal layout: {c.first_layout.reason}",
            f"Validation range: {c.validation_low.reason}",
        )
    )
    return texts, reasons


def set_style(label: QLabel, sheet: str) -> None:
    """Set a style sheet only when it changes: each call re-polishes the widget and
    lays its parent out again (a full-window repaint on every keystroke)."""
    if label.styleSheet() != sheet:
        label.setStyleSheet(sheet)


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
        self.badge.setMinimumWidth(130)
        # "STRADDLES THE LIMIT" on one line took 280 px of a 1366-px screen and squeezed
        # every figure beside it to six lines: the badge wraps to two lines instead.
        self.badge.setWordWrap(True)
        self.badge.setMaximumWidth(BADGE_MAX_WIDTH)
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
        cells = (
            ("peak", "Peak HBM per rank", 0, 0),
            ("left", "Left under the limit", 0, 2),
            ("limit", "Limit", 1, 0),
            ("world", "Ranks", 1, 2),
            ("capacity", "Usable capacity", 2, 0),
            ("counts", "GPU counts", 2, 2),
        )
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
        grid.setColumnStretch(3, 3)
        row.addLayout(grid, 1)
        self.counts = self.values["counts"]
        self.counts.setObjectName("gpuCounts")
        self.counts.setText(COUNTS_PENDING)
        self.counts.setStyleSheet("font-size: 9pt;")

    def show_estimate(self, plan: Plan, est: Estimate, units: str) -> None:
        text, color = VERDICT_WORDS[est.verdict], VERDICT_COLORS[est.verdict]
        self.badge.setText(text)
        set_style(
            self.badge,
            f"background: {color}; color: white; font-weight: 700; font-size: 14pt;"
            "border-radius: 6px; padding: 10px 14px;",
        )
        self.badge.setToolTip(est.verdict_reason)
        u: Any = units
        peak = est.fit_peak
        st = est.heaviest
        phase = st.peak_phase
        figure = fmt_range(peak.low, peak.high, u).replace(" G", NBSP + "G")  # wraps at "/"
        reserved = fmt_bytes(st.reserved_peak.high, u).replace(" G", NBSP + "G")
        self.values["peak"].setText(
            f"<b>{figure}</b><br><span style='font-size: 8pt;'>{phase} peak"
            + (f", stage {est.heaviest_stage}" if len(est.stages) > 1 else "")
            + f"; reserved {reserved}</span>"
        )
        self.values["peak"].setToolTip(peak_tooltip(est, u))
        self.names["limit"].setText(f"Limit ({plan.policy.headroom_percent:g} % headroom)")
        self.values["limit"].setText(fmt_bytes(est.limit_bytes, u))
        self.values["capacity"].setText(f"{fmt_bytes(est.capacity_bytes, u)} per GPU")
        self.values["capacity"].setToolTip(
            f"{plan.hardware.accelerator}; policy {plan.hardware.usable_policy}"
        )
        left = est.limit_bytes - peak.high
        self.values["left"].setText(
            fmt_bytes(left, u) if left >= 0 else f"over by {fmt_bytes(-left, u)}"
        )
        stages = len(est.stages)
        self.values["world"].setText(
            f"{est.world_size:,}" + (f" · {stages} pipeline stages" if stages > 1 else "")
        )
        self.counts.setText(COUNTS_UPDATING)
        self.counts.setToolTip("")
        self.set_stale(None)

    def show_counts(self, c: GpuCounts) -> None:
        """The three GPU counts of the layout search (computed off the GUI thread)."""
        counts = layout_counts(c)
        if counts is None:
            self.counts.setText(COUNTS_PENDING)
            self.counts.setToolTip("")
        else:
            texts, reasons = counts
            self.counts.setText(
                "<br>".join(f"{k}: <b>{v}</b>" for k, v in texts.items())
                .replace(" (", "<br><span style='font-size: 8pt;'>(", 1)
                .replace(")</b>", ")</span></b>", 1)
            )
            self.counts.setToolTip(reasons)

    def show_counts_unavailable(self, reason: str) -> None:
        self.counts.setText("layout search unavailable")
        self.counts.setToolTip(reason)

    def set_stale(self, message: str | None) -> None:
        """Say the figures are from the last valid plan, and why the current one fails."""
        if message:
            self.stale.setText("Showing the last valid estimate: " + message)
            set_style(
                self.badge,
                "background: #7f7f7f; color: white; font-weight: 700; font-size: 15pt;"
                "border-radius: 6px; padding: 10px 14px;",
            )
        else:
            self.stale.setText("")
