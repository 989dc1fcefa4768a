"""The long import fuzz run (issue 33): mutated files of every import kind through
``import_file`` → save → reopen, with the CI suite's runner and large counts.

    timeout 1800 python tests/fuzz_imports_long.py --per-kind 2000 --seed 1

prints one line per kind and a total: cases, refusals, imports, crashes (a traceback, or
a refusal wrapping an internal error), hangs (a case cut off by the 10 s deadline),
lost plans (an import that did not reopen equal) and the longest message. Exit status 1
if any of those is not zero or a message is over 300 characters.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--per-kind", type=int, default=2000, help="mutated files per import kind")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    sys.path.insert(0, str(ROOT))
    from engine.errors import MAX_MESSAGE_CHARS
    from tests.fuzz.run_imports import kind_tallies
    from tests.fuzz.tally import Tally

    work = Path(tempfile.mkdtemp(prefix="memplan-import-fuzz-"))
    start = time.perf_counter()
    total = Tally("total")
    for tally in kind_tallies(args.per_kind, args.seed, work):
        print(f"{tally.name}: {tally.summary()}", flush=True)
        if not tally.ok or tally.hangs:
            print(tally.problems(), flush=True)
        total.merge(tally)
    print(f"total: {total.summary()}")
    print(f"longest message ({len(total.longest_message)} ≤ {MAX_MESSAGE_CHARS}?): ", end="")
    print(total.longest_message)
    ok = total.ok and not total.hangs
    print(f"in {time.perf_counter() - start:.0f} s", end="")
    if ok:
        shutil.rmtree(work, ignore_errors=True)
        print()
    else:
        print(f"; the last case's files are in {work}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
