"""A report of a plan without a sweep or measured runs imports neither's code.

``memplan report`` is a one-shot process whose start is mostly imports, and the sweep,
the trace and measured-run code, the record schema, the config readers and the preset
summary are only needed by reports (or commands) that have them: they are imported on
first use (``gui.report.sections``, ``engine.validation``, ``engine.exports.formats``,
``engine.models.presets``). Nor does it import numpy: the charts are drawn with a bare
QPainter (a plotting library would pull numpy in, about half a second of a run).
Checked in a fresh interpreter, since this test session has imported them all already.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

NOT_LOADED = (
    "numpy",
    "engine.whatif.sweep",
    "engine.trace.compare",
    "engine.trace.record",
    "engine.validation.records",
    "engine.validation.calibrate",
    "engine.exports.titan_import",
    "engine.exports.ds_import",
    "engine.models.summary",
    "gui.report.sections.sweep",
    "gui.report.sections.trace_results",
    "gui.views.trace_paint",
    "gui.views.sweep_paint",
)

CHILD = f"""
import sys
from gui.__main__ import main
assert main(["report", "-o", sys.argv[1]]) == 0
print([m for m in {NOT_LOADED!r} if m in sys.modules])
"""


def test_a_default_report_leaves_them_unimported(tmp_path: Path) -> None:
    got = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "r.pdf")],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
    )
    assert got.stdout.strip().splitlines()[-1] == "[]"
    assert (tmp_path / "r.pdf").stat().st_size > 0
