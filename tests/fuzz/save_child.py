"""A process that saves one large plan over and over until it is killed (``run_kills``).

Usage: ``python -m tests.fuzz.save_child PATH RECORDS``. Prints ``ready`` once the first
save is complete; later saves alternate between the plan named ``kill-1`` and ``kill-2``,
serialised once, so nearly all the child's time is spent writing, fsyncing and renaming
(where a kill can do harm) rather than building JSON.
"""

from __future__ import annotations

import dataclasses
import sys

from engine.fileio.atomic import write_atomic
from engine.planfile import PlanFile, dumps, save
from tests.fuzz.corpus import seed_plans, with_records


def big_plan_file(records: int) -> PlanFile:
    """The default plan with ``records`` measured records: a file of a few MB, so that a
    kill often lands while the temp file is being written."""
    pf = with_records("kill-0", seed_plans()["default"])
    one = pf.measurements[0]
    many = tuple({**one, "label": f"fuzz {i}", "rank": i} for i in range(records))
    return dataclasses.replace(pf, measurements=many)


def main(path: str, records: int) -> None:
    pf = big_plan_file(records)
    blobs = [dumps(dataclasses.replace(pf, name=f"kill-{n}")).encode() for n in (1, 2)]
    save(pf, path)
    print("ready", flush=True)
    n = 0
    while True:
        n += 1
        write_atomic(blobs[n % 2], path)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
