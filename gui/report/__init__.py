"""The PDF procurement report: the same Estimate and chart code as the window, on paper.

``gather`` computes what the report shows (Qt-free); ``write_pdf`` lays it out as a
``QTextDocument`` with vector charts and paints it page by page into a PDF;
``print_report`` does the same onto a printer. Names are imported on first use, so
mounting ``memplan report`` (``gui.report.cli``) does not load Qt.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "ReportContent": "gui.report.content",
    "gather": "gui.report.content",
    "PAGE_SIZES": "gui.report.pdf",
    "print_report": "gui.report.pdf",
    "write_pdf": "gui.report.pdf",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'gui.report' has no attribute {name!r}")
    return getattr(import_module(_EXPORTS[name]), name)
