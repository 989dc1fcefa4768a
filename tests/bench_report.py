"""Benchmark of ``memplan report`` — run by hand, prints numbers (not a test).

    QT_QPA_PLATFORM=offscreen PYTHONPATH=. python tests/bench_report.py [--repeat N]
        [--plan FILE.memplan]

Prints, as medians over ``--repeat`` fresh interpreters (each after one run that
compiled the bytecode, which an installed app has cached):

* **end to end**: ``python -m gui report -o FILE`` of the default plan (or ``--plan``),
  wall and CPU (:func:`bench_gui.report_cli` measures the same).
* **where it goes**: the same steps in one child, timed one by one: importing the
  command line, the Qt application, importing the report, ``gather`` (the estimate, the
  GPU-count search and the re-estimating parts), laying the document out, painting the
  pages into the PDF.

Each figure has its CPU time beside it: on a machine shared with other jobs the wall
time includes waiting for a core. No assertion is made (tests never time).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_gui import _env, _spread, report_cli

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, os, resource, sys, time
marks, t0 = [], time.perf_counter()
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
def mark(name):
    marks.append((name, time.perf_counter() - t0, cpu()))
import gui.__main__
args = gui.__main__.build_parser("report").parse_args(["report", *sys.argv[2:], "-o", sys.argv[1]])
from engine.cli import common
plan, pf = common.load_plan(args)
mark("import the command line")
from gui.report.cli import _ensure_app
_ensure_app()
mark("Qt application")
from engine.planfile import PlanFile
from gui.report import gather
from gui.report.pdf import PAGE_SIZES, build_document, page_px, paint, text_rect
from PySide6.QtCore import QMarginsF
from PySide6.QtGui import QPageSize, QPdfWriter
mark("import the report")
c = gather(pf or PlanFile(plan=plan, name="Default plan"), "both")
mark("gather")
full = page_px("a4")
report = build_document(c, text_rect(full).size())
mark("lay out")
writer = QPdfWriter(sys.argv[1])
writer.setResolution(96)
writer.setPageSize(QPageSize(PAGE_SIZES["a4"]))
writer.setPageMargins(QMarginsF(0, 0, 0, 0))
paint(report, c, writer, full)
del writer
mark("paint")
print(json.dumps({"marks": marks, "pages": report.page_count}))
"""


def phases(repeat: int, plan: list[str]) -> tuple[dict[str, list[tuple[float, float]]], int]:
    """Per step, (wall, CPU) seconds of each run; and the page count."""
    out: dict[str, list[tuple[float, float]]] = {}
    pages = 0
    with tempfile.TemporaryDirectory() as tmp:
        pdf = str(Path(tmp) / "r.pdf")
        for i in range(repeat + 1):
            got = subprocess.run(
                [sys.executable, "-c", CHILD, pdf, *plan],
                env=_env(tmp),
                capture_output=True,
                text=True,
                check=True,
                cwd=ROOT,
            )
            if not i:
                continue  # the first run compiled the bytecode
            result = json.loads(got.stdout.strip().splitlines()[-1])
            pages, wall0, cpu0 = result["pages"], 0.0, 0.0
            for name, wall, cpu in result["marks"]:
                out.setdefault(name, []).append((wall - wall0, cpu - cpu0))
                wall0, cpu0 = wall, cpu
    return out, pages


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--plan", help="a .memplan file (default: the built-in default plan)")
    args = ap.parse_args()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    if args.plan is None:
        print("memplan report (default plan), end to end:", _spread(report_cli(args.repeat)))
    plan = [args.plan] if args.plan else []
    steps, pages = phases(args.repeat, plan)
    print(f"where it goes ({pages} pages; medians, wall / CPU):")
    for name, runs in steps.items():
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        print(f"  {name:<26} {wall:6.3f} s / {cpu:6.3f} s")
    total = [sum(r[i][0] for r in steps.values()) for i in range(args.repeat)]
    print(f"  {'sum of the steps':<26} {statistics.median(total):6.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
