"""Helpers for the report tests: build plans, write PDFs, read them back with poppler."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

from engine.plan import Plan, default_plan, with_values

PLANS: dict[str, dict[str, Any]] = {
    "default": {},
    "pipeline": {"parallelism.pp": 2, "parallelism.dp": 4},
    "offload": {
        "parallelism.strategy": "zero3",
        "offload.params": "cpu",
        "offload.optimizer": "cpu",
        "method.precision.policy": "amp_master",
    },
    "qlora": {"method.kind": "qlora"},
}


def plan_for(key: str) -> Plan:
    return with_values(default_plan(), PLANS[key])


def have_poppler() -> bool:
    return all(shutil.which(t) for t in ("pdftotext", "pdftoppm", "pdfinfo"))


def pdf_text(path: Path, layout: bool = False) -> str:
    """The PDF's text with whitespace collapsed; ``layout`` keeps table rows on lines."""
    args = ["pdftotext", *(["-layout"] if layout else []), str(path), "-"]
    raw = subprocess.run(args, check=True, capture_output=True).stdout
    return " ".join(raw.decode("utf-8").split())


def pdf_info(path: Path) -> dict[str, str]:
    out = subprocess.run(["pdfinfo", str(path)], check=True, capture_output=True, text=True)
    info = {}
    for line in out.stdout.splitlines():
        key, _, value = line.partition(":")
        info[key.strip()] = value.strip()
    return info


def page_images(path: Path, out_dir: Path, dpi: int = 40) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["pdftoppm", "-png", "-r", str(dpi), str(path), str(out_dir / "page")], check=True
    )
    return sorted(out_dir.glob("page*.png"))


def ink_share(png: Path) -> float:
    """Share of pixels that are not (near) white, sampled on a grid."""
    from PySide6.QtGui import QImage

    img = QImage(str(png))
    assert not img.isNull(), png
    inked = total = 0
    for y in range(0, img.height(), 2):
        for x in range(0, img.width(), 2):
            c = img.pixelColor(x, y)
            total += 1
            if min(c.red(), c.green(), c.blue()) < 235:
                inked += 1
    return inked / total
