"""Help → MemPlan Guide and Help → About MemPlan.

The guide says what the window's colours, groups, low–high hatching and three GPU
counts mean. Its colour swatches come from the very tables the chart and the verdict
badge draw with (``gui.views.chart``, ``gui.views.verdict``), so the guide cannot drift
from the screen. About names the versions a figure depends on: the app, the engine's
formulas (``engine.FORMULA_VERSION``, bumped when a row's rule changes), the plan-file
schema and the JSON output's version.
"""

from __future__ import annotations

import platform
from html import escape

import PySide6
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QMainWindow,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from engine import FORMULA_VERSION, __version__
from engine.estimate import VERDICT_WORDS, Verdict
from engine.planfile import SCHEMA_VERSION
from gui.views.chart_data import CACHE_LABEL, FRAGMENTATION_GROUP
from gui.views.colors import CAPACITY_COLOR, LIMIT_COLOR, VERDICT_COLORS, group_color

GROUP_MEANINGS: dict[str, str] = {
    "weights": "the model's parameters held on the GPU (sharded or frozen as the method says)",
    "gradients": "one gradient per trainable parameter",
    "optimizer": "optimizer states (Adam's two moments, fp32 master weights)",
    "activations": "tensors saved in the forward pass for the backward pass",
    "logits": "the output layer's logits and their fp32 copy for the loss",
    "inputs": "the token ids, labels and masks of the micro-batch",
    "gathered": "parameters gathered from their shards for the unit being computed (FSDP, ZeRO-3)",
    "buckets": "communication buckets of gradient reduction and parameter gathering",
    "buffers": "non-trainable model buffers (rotary tables, norms' statistics)",
    "temporaries": "short-lived tensors of one operation (the optimizer step, the loss)",
    "runtime": "memory outside PyTorch's allocator: CUDA context, NCCL",
    "workspace": "cuBLAS workspaces, one per (handle, stream) that runs a GEMM: allocated",
    "allocator": "the caching allocator's reserve: reserved minus allocated",
    FRAGMENTATION_GROUP: "the part of the allocator's reserve it cannot release "
    "(fragmented segments): it counts toward fit",
    "offload": "states moved to host RAM or NVMe (pinned: page-locked host buffers)",
    "processes": "host processes: the training ranks, data-loader workers, the OS reserve",
    "checkpoint": "checkpoint files and the host buffers that stage them",
}
"""What each ledger group counts (the chart stacks rows by group)."""


def _swatch(color: str) -> str:
    return f"<span style='color:{color}; font-size: 14pt'>■</span>"


VERDICT_MEANINGS: tuple[tuple[Verdict, str], ...] = (
    ("fits", "even the high estimate is within the limit"),
    ("straddles", "the low estimate fits and the high one does not: measure first"),
    ("does_not_fit", "even the low estimate exceeds the limit (or host RAM / NVMe do not fit)"),
)


_GUIDE = """
<h2>Reading MemPlan</h2>
<p>Every byte comes from a named <b>ledger row</b>: tensor count × bytes per element ×
replication ÷ the size of the group that shards it, with its formula and source (hover a
row in the Ledger tab). A row has a <b>low</b> and a <b>high</b> value; they are equal
when the rule is exact.</p>
<h3>The verdict</h3>
<ul>{verdicts}</ul>
<p>The peak that decides fit is the live tensors plus the fragmentation the caching
allocator cannot release plus the memory outside PyTorch (NCCL buffers, cuBLAS workspaces,
the CUDA context where the capacity includes it), on the heaviest rank (the heaviest
pipeline stage), compared with the <b>limit</b>: the usable capacity less the headroom
policy. Reserved memory is shown beside it, but its cached free blocks do not decide fit:
before raising out-of-memory the allocator frees them and retries.</p>
<h3>The chart</h3>
<p>Bars stack the ledger rows by <b>group</b>, one colour each:</p>
<table cellpadding="2">{groups}</table>
<p><b>▨ Hatching</b> on top of a bar is the low–high range: the bar's solid part is the
low estimate, the hatched part reaches the high one: the bar's top is the figure the
verdict compares. <b>⬚ A dotted box</b> over an HBM bar is the {cache}: the rest of
reserved memory, drawn so reserved stays visible. {cap} the solid
red line is the <b>usable capacity</b>; {lim} the dashed amber line is
the <b>limit</b> (capacity less headroom); the shaded band between them is the headroom.
<b>▲</b> marks the phase (or stage) with the peak.</p>
<h3>The three GPU counts</h3>
<ol>
<li><b>Arithmetic minimum</b> — the fewest ranks whose high estimate fits, ignoring
topology (TP may cross nodes, no rounding to nodes): a lower bound, not a purchase.</li>
<li><b>Procure</b> — the first legal layout under the practical rules (TP inside a node,
power-of-two TP, whole heads, layers and experts, a reachable batch), rounded to whole
nodes (or GPUs, by the policy): what to buy.</li>
<li><b>Validation range</b> — from the count that fits by the low estimate to the one
that fits by the high estimate. When they differ the range <i>straddles</i>: measure the
peak on the smaller count before buying.</li>
</ol>
<p>The <b>Layouts</b> tab lists them with their reasons, the chosen layout (the plan's
own when it fits), alternatives with <b>Apply</b>, the <b>fit levers</b> (recompute,
offload, LoRA, QLoRA, micro-batch 1: the GPUs each would need and what it costs; never
applied unless you press its <b>Apply</b>), and the topology: which groups run on
NVLink inside a node and which cross the network.</p>
<h3>What-if</h3>
<p><b>Sweep</b> varies one input over a range and charts the peak against it with the
fit boundary; <b>File → Compare</b> puts plans side by side with the rows and inputs
that differ. Both can be added to the PDF report.</p>
"""
"""The guide's text; {verdicts}, {groups}, {cache} and the swatches {cap}, {lim} filled in."""


def guide_html() -> str:
    """The in-app guide: colours, groups, hatching, lines and the three counts."""
    groups = "".join(
        f"<tr><td>{_swatch(group_color(g).name())}</td><td><b>{escape(g)}</b></td>"
        f"<td>{escape(meaning)}</td></tr>"
        for g, meaning in GROUP_MEANINGS.items()
    )
    verdicts = "".join(
        f"<li><span style='color:{VERDICT_COLORS[v]}'><b>{escape(VERDICT_WORDS[v])}</b></span>"
        f" — {escape(text)}</li>"
        for v, text in VERDICT_MEANINGS
    )
    return _GUIDE.format(
        verdicts=verdicts,
        groups=groups,
        cap=_swatch(CAPACITY_COLOR),
        lim=_swatch(LIMIT_COLOR),
        cache=escape(CACHE_LABEL),
    )


def about_html() -> str:
    # Imported when About is opened: the CLI package's import (its every command's
    # parser and output) is ~0.15 s the window's start does not need for one number.
    from engine.cli.json_form import JSON_VERSION

    return (
        f"<h2>MemPlan {escape(__version__)}</h2>"
        "<p>GPU, host-RAM and NVMe memory of LLM training jobs, row by row.</p>"
        "<table cellpadding='2'>"
        f"<tr><td>App version</td><td><b>{escape(__version__)}</b></td></tr>"
        f"<tr><td>Formula version</td><td><b>{FORMULA_VERSION}</b> "
        "<small>(the engine's rules; bumped when any row's rule changes)</small></td></tr>"
        f"<tr><td>Plan file schema</td><td><b>{SCHEMA_VERSION}</b></td></tr>"
        f"<tr><td>JSON output</td><td><b>json_version {JSON_VERSION}</b></td></tr>"
        f"<tr><td>Qt / PySide6</td><td>{escape(PySide6.__version__)}</td></tr>"
        f"<tr><td>Python</td><td>{escape(platform.python_version())}</td></tr>"
        "</table>"
    )


class TextDialog(QDialog):
    """A non-modal dialog around one HTML text, closed by Close or Escape."""

    def __init__(
        self, title: str, html: str, parent: QWidget | None, size: tuple[int, int]
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle(title)
        self.resize(*size)
        self.text = QTextBrowser(self)
        self.text.setOpenExternalLinks(False)
        self.text.setHtml(html)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.close)
        col = QVBoxLayout(self)
        col.addWidget(self.text, 1)
        col.addWidget(buttons)


class HelpMenu:
    """Help → MemPlan Guide (F1) and About MemPlan on ``window``'s menu bar."""

    def __init__(self, window: QMainWindow) -> None:
        self.window = window
        self.dialogs: dict[str, TextDialog] = {}
        menu = window.menuBar().addMenu("&Help")
        self.guide = menu.addAction("MemPlan &Guide")
        self.guide.setShortcut(QKeySequence(QKeySequence.StandardKey.HelpContents))
        self.guide.triggered.connect(lambda _c=False: self.show_guide())
        self.about = menu.addAction("&About MemPlan")
        self.about.triggered.connect(lambda _c=False: self.show_about())

    def _show(self, key: str, title: str, html: str, size: tuple[int, int]) -> TextDialog:
        if key not in self.dialogs:
            self.dialogs[key] = TextDialog(title, html, self.window, size)
        dialog = self.dialogs[key]
        dialog.show()
        dialog.raise_()
        return dialog

    def show_guide(self) -> TextDialog:
        return self._show("guide", "MemPlan Guide", guide_html(), (640, 600))

    def show_about(self) -> TextDialog:
        return self._show("about", "About MemPlan", about_html(), (460, 340))
