"""The report's sections, one module per part, in reading order.

Each section is a pure function of :class:`gui.report.content.ReportContent` returning
HTML for ``QTextDocument``: ``title`` (plan, verdict, key figures, counts), ``memory``
(ledger, charts and timeline, stages, host RAM / NVMe / checkpoint), ``layouts`` (GPU
counts and layouts), ``diagnostics`` (what to change, sensitivity), ``measuring``
(assumptions, validation plan, measured results) and ``appendix`` (every input, the
generated framework configurations); ``exceptions`` (changed inputs, wide ranges,
warnings), ``topology`` (the chosen layout drawn), and — when asked for — ``sweep``
and ``comparison``. :data:`DRAWINGS` are the vector drawings sections place by key.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QRectF
from PySide6.QtGui import QPainter

from gui.report.content import ReportContent
from gui.report.sections.appendix import appendix_section, inputs_section
from gui.report.sections.comparison import comparison_section, draw_comparison_chart
from gui.report.sections.diagnostics import diagnostics_section
from gui.report.sections.exceptions import exceptions_section
from gui.report.sections.layouts import layouts_section
from gui.report.sections.measuring import assumptions_section, measured_section
from gui.report.sections.memory import ledger_section, nodes_section, phases_section
from gui.report.sections.sweep import draw_sweep_chart, sweep_section
from gui.report.sections.title import title_page
from gui.report.sections.topology import draw_topology_chart, topology_section
from gui.report.sections.trace_results import draw_trace_chart

Section = Callable[[ReportContent], str]
Drawing = Callable[[ReportContent, QPainter, QRectF], None]

SECTIONS: tuple[Section, ...] = (
    title_page,
    exceptions_section,
    ledger_section,
    phases_section,
    nodes_section,
    layouts_section,
    topology_section,
    diagnostics_section,
    assumptions_section,
    measured_section,
    sweep_section,
    comparison_section,
    inputs_section,
    appendix_section,
)
"""Every section, in the order the report prints them."""

DRAWINGS: dict[str, Drawing] = {
    "topology": draw_topology_chart,
    "sweep": draw_sweep_chart,
    "comparison": draw_comparison_chart,
    "trace": draw_trace_chart,
}
"""Vector drawings by placeholder key (``html.chart(key, …)``), recorded at the slot's
size like the charts (gui.report.charts)."""

__all__ = ["DRAWINGS", "SECTIONS", "Drawing", "Section"]
