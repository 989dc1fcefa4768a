"""The long fuzz run (issue 21): the CI suite's runners with large counts.

    python tests/fuzz_long.py --files 10000 --plans 3000 --kills 200 --gui-edits 1000

prints one line per runner and a total: cases, crashes, hangs (cases over 30 s; one
still running after ``--watchdog`` seconds ends the run with every thread's stack),
lost plans and the longest message. Exit status 1 if anything crashed, hung or was lost.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _arguments() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--files", type=int, default=10_000, help="mutated plan files")
    p.add_argument("--plans", type=int, default=3_000, help="hypothesis plans through views")
    p.add_argument("--cli", type=int, default=1_000, help="commands on bad arguments/files")
    p.add_argument("--kills", type=int, default=200, help="SIGKILLs during a save")
    p.add_argument("--recovery", type=int, default=10, help="two-instance crash rounds")
    p.add_argument("--gui-edits", type=int, default=1_000, help="random edits in the window")
    p.add_argument("--reports", type=int, default=10, help="PDF reports of random plans")
    p.add_argument("--first-plan", type=int, default=1, help="view plans from this one on")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--watchdog", type=float, default=600.0, help="seconds before a hang")
    return p.parse_args()


def main() -> int:
    args = _arguments()
    work = Path(tempfile.mkdtemp(prefix="memplan-fuzz-"))
    os.environ.update(
        QT_QPA_PLATFORM="offscreen",
        MEMPLAN_STATE_DIR=str(work / "autosave"),
        MEMPLAN_CONFIG_DIR=str(work / "config"),
    )
    sys.path.insert(0, str(ROOT))
    from tests.fuzz import tally as tally_module
    from tests.fuzz.long_runs import run_all

    tally_module.WATCHDOG_S.append(args.watchdog)
    start = time.perf_counter()
    tallies = run_all(args, work)
    ok = all(t.ok and not t.hangs for t in tallies)
    print(f"\nin {time.perf_counter() - start:.0f} s", end="")
    if ok:
        shutil.rmtree(work, ignore_errors=True)
        print()
    else:
        print(f"; the failing cases' files are in {work}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
