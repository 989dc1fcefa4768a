"""Every runner with the long script's counts (``tests/fuzz_long.py``), printed as it goes."""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed

from engine.errors import MAX_MESSAGE_CHARS
from engine.plan import Plan
from engine.planfile import PlanFile, save
from gui import app
from tests.fuzz.plans import plans, random_plan
from tests.fuzz.run_cli import run_cli
from tests.fuzz.run_files import cli_views, plan_views, run_files
from tests.fuzz.run_gui import report_case, run_gui_edits
from tests.fuzz.run_processes import run_kills, run_recovery
from tests.fuzz.tally import HANG_S, Tally

CLI_VIEW_EVERY = 10
"""One plan in this many also goes through the terminal's text and JSON forms."""


def run_views(count: int, seed: int, folder: Path, first: int = 1) -> Tally:
    """``count`` hypothesis plans through every engine view (from the ``first``-th: the
    plans before it are drawn, not viewed, so one stretch of a long run can be rerun)."""
    tally = Tally("plans through views")
    folder.mkdir(parents=True, exist_ok=True)
    seen = [0]

    @hypothesis_seed(seed)
    @settings(
        max_examples=count,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(plan=plans())
    def one(plan: Plan) -> None:
        seen[0] += 1
        if seen[0] < first:
            return
        start = time.perf_counter()
        plan_views(plan, f"plan {seen[0]}", tally)
        if seen[0] % CLI_VIEW_EVERY == 0:
            cli_views(plan, folder, f"plan {seen[0]}", tally)
        if time.perf_counter() - start > HANG_S:  # keep it, to time each view alone
            save(PlanFile(plan=plan, name=f"plan {seen[0]}"), folder / f"slow-{seen[0]}.memplan")

    one()
    return tally


def run_window(edits: int, reports: int, seed: int, folder: Path) -> list[Tally]:
    """GUI edits in a real window, and PDF reports (both need the QApplication)."""
    folder.mkdir(parents=True, exist_ok=True)
    app.make_app()
    window = app.new_window()
    edit_tally = Tally("gui edits")
    for round_seed in range(seed, seed + max(1, edits // 250)):
        part = run_gui_edits(window, min(250, edits), round_seed)
        edit_tally.merge(part)
    window.doc.undo_stack.setClean()
    window.close()
    report_tally = Tally("pdf reports")
    rng = random.Random(seed)
    for i in range(reports):
        report_case(random_plan(rng), folder, f"report {i}", report_tally)
    return [edit_tally, report_tally]


def run_all(args: argparse.Namespace, work: Path) -> list[Tally]:
    steps = [
        lambda: [run_files(args.files, args.seed, work / "files")],
        lambda: [run_views(args.plans, args.seed, work / "views", args.first_plan)],
        lambda: [run_cli(args.cli, args.seed, work / "cli")],
        lambda: [run_kills(args.kills, args.seed, work / "kills")],
        lambda: [run_recovery(args.recovery, args.seed, work / "recovery")],
        lambda: run_window(args.gui_edits, args.reports, args.seed, work / "window"),
    ]
    tallies: list[Tally] = []
    for step in steps:
        for tally in step():
            tallies.append(tally)
            print(f"{tally.name}: {tally.summary()}", flush=True)
            if not tally.ok:
                print(tally.problems(), flush=True)
    total = Tally("total")
    for tally in tallies:
        total.merge(tally)
    print(f"total: {total.summary()}")
    print(
        f"longest message ({len(total.longest_message)} ≤ {MAX_MESSAGE_CHARS}?): "
        f"{total.longest_message}"
    )
    return tallies
