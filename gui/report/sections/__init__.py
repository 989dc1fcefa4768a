"""The report's sections, one module per part, in reading order.

Each section is a pure function of :class:`gui.report.content.ReportContent` returning
HTML for ``QTextDocument``: ``title`` (plan, verdict, key figures, counts), ``memory``
(ledger, charts and timeline, stages, host RAM / NVMe / checkpoint), ``layouts`` (GPU
counts and layouts), ``diagnostics`` (what to change, sensitivity), ``measuring``
(assumptions, validation plan, measured results) and ``appendix`` (every input, the
generated framework configurations).
"""

from __future__ import annotations

from collections.abc import Callable

from gui.report.content import ReportContent
from gui.report.sections.appendix import appendix_section, inputs_section
from gui.report.sections.diagnostics import diagnostics_section
from gui.report.sections.layouts import layouts_section
from gui.report.sections.measuring import assumptions_section, measured_section
from gui.report.sections.memory import ledger_section, nodes_section, phases_section
from gui.report.sections.title import title_page

Section = Callable[[ReportContent], str]

SECTIONS: tuple[Section, ...] = (
    title_page,
    ledger_section,
    phases_section,
    nodes_section,
    layouts_section,
    diagnostics_section,
    assumptions_section,
    measured_section,
    inputs_section,
    appendix_section,
)
"""Every section, in the order the report prints them."""

__all__ = ["SECTIONS", "Section"]
