"""The report's sections, one module per part, in reading order.

Each section is a pure function of :class:`gui.report.content.ReportContent` returning
HTML for ``QTextDocument``: ``title`` (plan, verdict, key figures, counts), ``memory``
(ledger, charts and timeline, stages, host RAM / NVMe / checkpoint), ``layouts`` (GPU
counts and layouts), ``diagnostics`` (what to change, sensitivity), ``measuring``
(assumptions, validation plan, measured results) and ``appendix`` (every input, the
generated framework configurations); ``exceptions`` (changed inputs, wide ranges,
warnings), ``topology`` (the chosen layout drawn), and — when asked for — ``sweep``
and ``comparison``. :data:`DRAWINGS` are the vector drawings sections place by key.

The sweep section and the trace drawing are imported the first time a report has a
sweep or a trace to print (:func:`sweep_section`, :func:`draw_trace_chart`): most reports
have neither, and their engine modules (``engine.whatif.sweep``, ``engine.trace``) and
painters are tens of classes to build at every ``memplan report`` start.
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
from gui.report.sections.title import title_page
from gui.report.sections.topology import draw_topology_chart, topology_section

Section = Callable[[ReportContent], str]
Drawing = Callable[[ReportContent, QPainter, QRectF], None]


def sweep_section(c: ReportContent) -> str:
    """The sweep section (:mod:`gui.report.sections.sweep`), when the report has one."""
    if c.sweep is None:
        return ""
    from gui.report.sections import sweep

    return sweep.sweep_section(c)


def draw_sweep_chart(c: ReportContent, painter: QPainter, rect: QRectF) -> None:
    """The sweep chart (:mod:`gui.report.sections.sweep`), when the report has a sweep."""
    if c.sweep is not None:
        from gui.report.sections import sweep

        sweep.draw_sweep_chart(c, painter, rect)


def draw_trace_chart(c: ReportContent, painter: QPainter, rect: QRectF) -> None:
    """The newest trace drawn (:mod:`gui.report.sections.trace_results`), when the plan
    holds measured runs (a trace is one)."""
    if c.reconciliation is not None:
        from gui.report.sections import trace_results

        trace_results.draw_trace_chart(c, painter, rect)


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
