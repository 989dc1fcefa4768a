"""Run every plan of the export grid through its framework's own parser (issue 39).

    MEMPLAN_CHECK_PYTHON=/path/to/scratch/venv/bin/python \\
    PYTHONPATH=/path/to/Megatron-LM \\
    .venv/bin/python tests/engine/exports/framework_parsers.py

The frameworks live in a scratch environment outside the repository (never the
project's .venv): ``MEMPLAN_CHECK_PYTHON`` names its interpreter, and
:func:`engine.exports.check.check_export` runs DeepSpeed's ``DeepSpeedConfig``,
Megatron-LM's ``parse_args`` + ``validate_args`` on the exported argv, accelerate's
loaders and torchtitan's ``Trainer.Config`` there, handing them MemPlan's data, never
generated code. A framework that is not installed is reported as skipped, not failed;
the exit status is 1 only when a framework that ran refused a file. The table it prints
is the one in docs/export-parsers.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from export_grid import GRID, grid_plan

from engine.exports import FORMATS
from engine.exports.check import check_export


def main() -> int:
    """Print one table row per (plan, parser); 1 when a parser that ran refused one."""
    refused = 0
    print("| plan | format | parser | result | what it said |")
    print("|---|---|---|---|---|")
    for label, fmt, model, changes in GRID:
        plan = grid_plan(model, changes)
        for r in check_export(FORMATS[fmt].export(plan), plan, timeout=300):
            if not r.available:
                verdict = "skipped"
            elif r.ok:
                verdict = "accepted"
            else:
                verdict, refused = "REFUSED", refused + 1
            said = r.message.replace("|", "/")[:160]
            print(f"| {label} | {fmt} | {r.format} | {verdict} | {said} |", flush=True)
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
