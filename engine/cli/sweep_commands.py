"""``memplan sweep PLAN --vary FIELD=VALUES``: one input over a range, re-estimated.

``VALUES`` is ``start:stop:xK`` (geometric), ``start:stop:+K`` (linear) or a list
``a,b,c``; each value prints the peak HBM per rank (low–high), the limit, the capacity
and the verdict, and the fit boundary is marked. A value the plan cannot take is a
line with the reason (the sweep goes on). ``--json`` and ``--csv`` print the same.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
from typing import Any

from engine import FORMULA_VERSION, __version__
from engine.cli.common import EXIT_OK, EXIT_USAGE, CliError, load_plan, plan_args
from engine.cli.json_form import JSON_VERSION
from engine.cli.text import table
from engine.estimate import VERDICT_WORDS
from engine.units import UnitChoice, fmt_bytes, fmt_range
from engine.whatif.sweep import Sweep, SweepSpecError, parse_vary, show_value, sweep

CSV_COLUMNS = (
    "field",
    "value",
    "peak_low_bytes",
    "peak_high_bytes",
    "limit_bytes",
    "capacity_bytes",
    "verdict",
    "boundary",
    "reason",
)


def render_sweep(s: Sweep, units: UnitChoice) -> str:
    """The terminal table; ◀ marks the fit boundary, * the plan's own value."""
    b = s.boundary
    body = []
    for i, p in enumerate(s.points):
        mark = ("◀ " + b.kind + " that fits") if b is not None and b.index == i else ""
        own = "*" if p.value == s.base_value else ""
        if not p.ok:
            body.append([own + show_value(p.value), "—", "—", "—", "invalid", p.reason])
            continue
        body.append(
            [
                own + show_value(p.value),
                fmt_range(p.low or 0, p.high or 0, units),
                fmt_bytes(p.limit or 0, units),
                fmt_bytes(p.capacity or 0, units),
                VERDICT_WORDS[p.verdict or "fits"],
                mark,
            ]
        )
    head = [s.path, "peak HBM per rank (low–high)", "limit", "capacity", "verdict", ""]
    out = [
        f"Sweep of {s.path} over {s.text or len(s.points)} ({len(s.points)} values; "
        f"* = the plan's own value {show_value(s.base_value)}):",
        table(head, body, set()),
        f"Fit boundary: {s.summary()}.",
    ]
    if s.cancelled:
        out.append(f"(cancelled after {len(s.points)} of {s.requested} values)")
    return "\n".join(out)


def sweep_json(s: Sweep) -> dict[str, Any]:
    """The ``--json`` object (json_version 1)."""
    b = s.boundary
    return {
        "json_version": JSON_VERSION,
        "memplan_version": __version__,
        "formula_version": FORMULA_VERSION,
        "config_hash": s.base_hash,
        "field": s.path,
        "range": s.text,
        "base_value": s.base_value,
        "boundary": None if b is None else {"kind": b.kind, "value": b.value, "index": b.index},
        "summary": s.summary(),
        "points": [
            {
                "value": p.value,
                "valid": p.ok,
                "peak": None if not p.ok else {"low_bytes": p.low, "high_bytes": p.high},
                "limit_bytes": p.limit,
                "capacity_bytes": p.capacity,
                "verdict": p.verdict,
                "reason": p.reason,
            }
            for p in s.points
        ],
    }


def sweep_csv(s: Sweep) -> str:
    """One line per value (bytes as integers; empty cells where a value is invalid)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    b = s.boundary
    for i, p in enumerate(s.points):
        w.writerow(
            [
                s.path,
                p.value if isinstance(p.value, int | float | str) else json.dumps(p.value),
                *("" if v is None else v for v in (p.low, p.high, p.limit, p.capacity)),
                p.verdict or "invalid",
                b.kind if b is not None and b.index == i else "",
                p.reason,
            ]
        )
    return buf.getvalue()


def cmd_sweep(args: argparse.Namespace) -> int:
    plan, _ = load_plan(args)
    try:
        spec = parse_vary(args.vary, plan)
    except SweepSpecError as exc:
        raise CliError(f"--vary: {exc}", EXIT_USAGE) from exc
    result = sweep(plan, spec)
    if args.json:
        print(json.dumps(sweep_json(result), indent=2))
    elif args.csv:
        print(sweep_csv(result), end="")
    else:
        print(render_sweep(result, args.units))
    return EXIT_OK


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("sweep", help="one input over a range: peak HBM, verdict, fit boundary")
    plan_args(p)
    p.add_argument(
        "--vary",
        required=True,
        metavar="FIELD=VALUES",
        help="e.g. batch.seq_len=1024:32768:x2, parallelism.dp=8:64:+8, method.lora.rank=8,16,64",
    )
    form = p.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="emit the documented JSON object")
    form.add_argument("--csv", action="store_true", help="one CSV line per value")
    p.add_argument("--units", choices=["gb", "gib", "both"], default="both")
    p.set_defaults(handler=cmd_sweep)
