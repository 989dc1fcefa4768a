"""Checks run inside the frozen bundle (``MEMPLAN_BUNDLE_SELFTEST=resources|qt|all``).

Why: a PyInstaller bundle fails in ways a source checkout never shows, namely a data file
or Qt plugin left behind, or resources quietly read from a source tree that happens to
be nearby. These checks look from inside the bundled program and print one JSON object
so ``packaging/smoke_test.sh`` can assert on it. They cover the Qt stack the GUI and the
PDF report rely on even before the GUI itself is part of the build.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any


def check_resources() -> dict[str, Any]:
    """Resources resolve inside the bundle folder and hold what the engine reads."""
    root = resources.files("resources")
    bundle = Path(getattr(sys, "_MEIPASS", "")).resolve() if hasattr(sys, "_MEIPASS") else None
    root_path = Path(str(root)).resolve()
    presets = sorted(p.name for p in root.joinpath("models").iterdir() if p.name.endswith(".json"))
    result = {
        "frozen": bool(getattr(sys, "frozen", False)),
        "resources_dir": str(root_path),
        "inside_bundle": bundle is not None and root_path.is_relative_to(bundle),
        "presets": len(presets),
        "schema": root.joinpath("schema", "memplan.schema.json").is_file(),
        "sources": root.joinpath("sources.json").is_file(),
        "icon_svg": root.joinpath("icons", "memplan.svg").is_file(),
        "gui_app": importlib.util.find_spec("gui.app") is not None,
    }
    result["ok"] = all(
        [result["frozen"], result["inside_bundle"], presets, result["schema"], result["sources"]]
    )
    return result


def check_qt() -> dict[str, Any]:
    """Qt starts offscreen, has fonts, paints a stacked bar chart with QPainter (as the
    window's charts are), renders the SVG icon and writes a PDF: the pieces the window
    and the report are built from."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6 import __version__ as pyside_version
    from PySide6.QtCore import QByteArray, Qt
    from PySide6.QtGui import QColor, QFontDatabase, QGuiApplication, QImage, QPainter, QPdfWriter
    from PySide6.QtSvg import QSvgRenderer
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([])
    image = QImage(320, 240, QImage.Format.Format_RGB32)
    image.fill(Qt.GlobalColor.white)
    bars = QPainter(image)
    for x, (low, high) in enumerate(((60, 120), (40, 150))):
        bars.fillRect(60 + 120 * x, 240 - low, 72, low, QColor("blue"))
        bars.fillRect(60 + 120 * x, 240 - high, 72, high - low, QColor("red"))
    bars.drawText(10, 20, "MemPlan")
    bars.end()
    colours = {
        image.pixel(x, y) for x in range(0, image.width(), 8) for y in range(0, image.height(), 8)
    }
    icon = resources.files("resources").joinpath("icons", "memplan.svg")
    svg_ok = icon.is_file() and QSvgRenderer(QByteArray(icon.read_bytes())).isValid()
    with tempfile.TemporaryDirectory() as tmp:
        pdf_path = Path(tmp) / "selftest.pdf"
        writer = QPdfWriter(str(pdf_path))
        painter = QPainter(writer)
        painter.drawText(100, 100, "MemPlan bundle self-test")
        painter.end()
        pdf_bytes = pdf_path.read_bytes()
    result = {
        "qt": pyside_version,
        "platform": QGuiApplication.platformName(),
        "fonts": len(QFontDatabase.families()),
        "chart_colours": len(colours),
        "icon_renders": svg_ok,
        "pdf_bytes": len(pdf_bytes),
    }
    result["ok"] = (
        result["fonts"] > 0
        and result["chart_colours"] > 2
        and svg_ok
        and pdf_bytes.startswith(b"%PDF")
    )
    del app
    return result


def run(mode: str) -> int:
    """Run the checks ``mode`` names, print them as JSON, exit 0 only if all pass."""
    report: dict[str, Any] = {}
    if mode in ("resources", "all"):
        report["resources"] = check_resources()
    if mode in ("qt", "all"):
        report["qt"] = check_qt()
    if not report:
        print(f"bundle_selftest: unknown mode {mode!r} (resources, qt, all)", file=sys.stderr)
        return 2
    print(json.dumps(report, sort_keys=True))
    return 0 if all(part["ok"] for part in report.values()) else 1
