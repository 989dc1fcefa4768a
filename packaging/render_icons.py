"""Render resources/icons/memplan.svg to the PNG sizes desktops ask for, and an .ico.

Why a script: the icon is drawn by hand as SVG (the source of truth); the PNGs and the
Windows .ico are derived files, regenerated with this after editing the SVG:

    QT_QPA_PLATFORM=offscreen python packaging/render_icons.py

It renders with QtSvg (already a MemPlan dependency) rather than ImageMagick, whose SVG
support needs an extra delegate; ImageMagick's ``convert`` is used only to pack the .ico
when it is installed.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ICONS = Path(__file__).resolve().parent.parent / "resources" / "icons"
SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
ICO_SIZES = (16, 24, 32, 48, 64, 128, 256)


def render(size: int, renderer: object, out: Path) -> None:
    """Draw the SVG into a transparent square image of ``size`` pixels."""
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QImage, QPainter

    image = QImage(size, size, QImage.Format.Format_ARGB32)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter)  # type: ignore[attr-defined]
    painter.end()
    if not image.save(str(out)):
        raise SystemExit(f"render_icons: could not write {out}")


def main() -> int:
    from PySide6.QtGui import QGuiApplication
    from PySide6.QtSvg import QSvgRenderer

    app = QGuiApplication(sys.argv[:1])
    renderer = QSvgRenderer(str(ICONS / "memplan.svg"))
    if not renderer.isValid():
        raise SystemExit("render_icons: memplan.svg does not parse")
    for size in SIZES:
        render(size, renderer, ICONS / f"memplan-{size}.png")
    convert = shutil.which("convert")
    if convert:
        pngs = [str(ICONS / f"memplan-{s}.png") for s in ICO_SIZES]
        subprocess.run([convert, *pngs, str(ICONS / "memplan.ico")], check=True)
    else:
        print("render_icons: ImageMagick `convert` not found; memplan.ico not updated")
    del app
    print(f"render_icons: wrote {len(SIZES)} PNGs to {ICONS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
