"""Framework configs generated from a plan, and importers that read them back.

:mod:`engine.exports.formats` is the table of formats; each exporter returns an
:class:`~engine.exports.common.Export` (text + the plan inputs it cannot express) and
each importer an :class:`~engine.exports.common.Imported` (plan + resolutions +
warnings).
"""

from __future__ import annotations

from collections.abc import Callable

from engine.exports.common import Export, Imported, Unexpressed
from engine.exports.formats import FORMATS, Format, import_export
from engine.plan import Plan

EXPORTERS: dict[str, Callable[[Plan], Export]] = {n: f.export for n, f in FORMATS.items()}

__all__ = ["EXPORTERS", "FORMATS", "Export", "Format", "Imported", "Unexpressed", "import_export"]
