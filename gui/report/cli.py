"""``memplan report PLAN -o report.pdf``: the PDF report from the command line.

Works without a display: Qt is told to render offscreen when no display is set,
before the application object exists. Exit codes follow the engine's CLI: 1 for a
plan or file that cannot be reported (with the message), 2 for wrong usage.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from engine.cli import common as engine_cli
from engine.cli.common import EXIT_BAD_PLAN, EXIT_OK, EXIT_USAGE, CliError
from engine.errors import PlanError
from engine.planfile import PlanFile, PlanFileError, load
from gui.display import has_display
from gui.report.content import WIDE_RANGE_PERCENT


def _ensure_app() -> object:
    """The running application (the window's, in-process), or a new offscreen-capable
    one: a ``QGuiApplication``, since the report paints text and vectors, no widgets
    (QtWidgets would only add its import and style to every command-line report)."""
    if not has_display():
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
    from PySide6.QtGui import QGuiApplication

    app = QGuiApplication.instance()
    if app is None:
        app = QGuiApplication([sys.argv[0] if sys.argv else "memplan"])
    return app


def cmd_report(args: argparse.Namespace) -> int:
    plan, pf = engine_cli.load_plan(args)
    if pf is None:
        name = "Default plan" if not args.preset else f"{args.preset} plan"
        pf = PlanFile(plan=plan, name=name)
    elif plan is not pf.plan:  # --preset or --set changed it: report what was computed
        import dataclasses

        pf = dataclasses.replace(pf, plan=plan)
    out = Path(args.output)
    extras = appendices(args, pf)
    from gui.report import gather, write_pdf

    try:
        content = gather(
            pf, args.units, wide_percent=args.wide_range, levers=not args.no_levers, **extras
        )
    except PlanError as exc:
        raise CliError(f"plan cannot be computed: {exc}") from exc
    _app = _ensure_app()  # after the estimate: a plan that cannot be computed needs no Qt
    try:
        pages = write_pdf(content, out, args.page)
    except OSError as exc:
        raise CliError(f"cannot write {out}: {exc}", EXIT_BAD_PLAN) from exc
    if not out.is_file() or out.stat().st_size == 0:
        raise CliError(f"cannot write {out}")
    print(f"wrote {out} ({pages} pages, config {content.est.config_hash[:12]})")
    return EXIT_OK


def appendices(args: argparse.Namespace, pf: PlanFile) -> dict[str, Any]:
    """The comparison (``--compare``) and sweep (``--sweep``) the report should include,
    computed here (they need no Qt); each one's engine module is imported only when asked
    for."""
    out: dict[str, Any] = {}
    if args.compare:
        from engine.whatif.compare import compare

        named = [(pf.name or "this plan", pf.plan)]
        for path in args.compare:
            try:
                named.append((Path(path).name, load(path).plan))
            except PlanFileError as exc:
                raise CliError(f"--compare {path}: {exc}") from exc
        out["comparison"] = compare(named)
    if args.sweep:
        from engine.whatif.sweep import SweepSpecError, parse_vary, sweep

        try:
            out["sweep"] = sweep(pf.plan, parse_vary(args.sweep, pf.plan))
        except SweepSpecError as exc:
            raise CliError(f"--sweep: {exc}", EXIT_USAGE) from exc
    return out


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``report`` to the ``memplan`` parser (a FRONTEND_COMMANDS hook)."""
    p = sub.add_parser("report", help="write the PDF procurement report of a plan")
    engine_cli.plan_args(p)
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="the PDF to write")
    p.add_argument("--page", choices=["a4", "letter"], default="a4", help="paper size")
    p.add_argument(
        "--units",
        choices=["gb", "gib", "both"],
        default="both",
        help="units of the sizes in the text and charts",
    )
    p.add_argument(
        "--compare",
        action="append",
        default=[],
        metavar="OTHER.memplan",
        help="add an appendix comparing the plan with this one (repeatable)",
    )
    p.add_argument(
        "--sweep", metavar="FIELD=VALUES", help="add a sweep, e.g. batch.seq_len=1024:32768:x2"
    )
    p.add_argument(
        "--wide-range",
        type=float,
        default=WIDE_RANGE_PERCENT,
        metavar="PERCENT",
        help="rows whose range is at least this share of their location's peak are listed "
        f"as wide (default {WIDE_RANGE_PERCENT:g})",
    )
    p.add_argument(
        "--no-levers",
        action="store_true",
        help="leave out the fit levers (recompute, offload, LoRA, QLoRA, micro-batch 1: "
        "five more searches)",
    )
    p.set_defaults(handler=cmd_report)
