"""``memplan compare A B [C …]``: plans side by side, and what differs between them.

One plan and ``--set`` overrides compare the plan with its edited copy
(``memplan compare a.memplan --set batch.seq_len=8192``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from engine import FORMULA_VERSION, __version__
from engine.cli.common import (
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    apply_sets,
    search_budget,
    search_budget_arg,
)
from engine.cli.json_form import JSON_VERSION
from engine.cli.layout_json import layout_json
from engine.cli.text import table
from engine.fileio.oneline import one_line
from engine.layout.counts import GpuCounts
from engine.plan import Plan
from engine.planfile import PlanFileError, load
from engine.units import UnitChoice, fmt_range
from engine.whatif.compare import (
    ABSENT,
    SUMMARY_FIGURES,
    Comparison,
    Side,
    compare,
    delta_text,
    show_input,
    summary,
)


def _names(paths: list[str]) -> list[str]:
    """Column names: the file names, or the paths as given where two names collide."""
    names = [Path(p).name for p in paths]
    picked = [n if names.count(n) == 1 else p for n, p in zip(names, paths, strict=True)]
    return [one_line(n) for n in picked]  # a file name may hold control characters


def load_sides(args: argparse.Namespace) -> list[tuple[str, Plan]]:
    """The (name, plan) pairs the command line names (files, or one file and its
    ``--set`` copy)."""
    plans: list[Plan] = []
    for path in args.plans:
        try:
            pf = load(path)
        except PlanFileError as exc:
            raise CliError(f"{path}: {exc}") from exc
        plans.append(pf.plan)
    named = list(zip(_names(args.plans), plans, strict=True))
    if args.set and len(plans) != 1:
        raise CliError("--set makes an edited copy of a single plan: give one PLAN", EXIT_USAGE)
    if args.set:
        named.append((f"{named[0][0]} (edited)", apply_sets(plans[0], args.set)))
    if len(named) < 2:
        raise CliError("compare needs two or more plans (or one plan and --set)", EXIT_USAGE)
    return named


def render_comparison(c: Comparison, units: UnitChoice, all_rows: bool = False) -> str:
    """The terminal form: figures side by side, the inputs and the rows that differ."""
    names = [s.name for s in c.sides]
    sums = [summary(s, units) for s in c.sides]
    out = [f"Comparing {len(names)} plans (deltas against {names[0]}):", ""]
    out.append(table(["", *names], [[k, *(s[k] for s in sums)] for k in SUMMARY_FIGURES], set()))
    out.append("")
    if c.inputs:
        out.append(f"Inputs that differ ({len(c.inputs)}):")
        body = [[d.path, *(show_input(v) for v in d.values)] for d in c.inputs]
        out.append(table(["field", *names], body, set()))
    else:
        out.append("Inputs that differ: none (the plans have the same inputs)")
    rows = c.rows if all_rows else c.changed_rows
    out.append("")
    title = (
        f"Ledger rows (all {len(rows)}, in ledger order)"
        if all_rows
        else f"Ledger rows that differ ({len(rows)} of {len(c.rows)}, largest change first)"
    )
    out.append(
        f"{title}: HBM per rank of the heaviest stage, host RAM and NVMe per node, "
        "checkpoint storage of the job:"
    )
    headers = ["row", "where", *names, *(f"Δ {n} low / high" for n in names[1:])]
    body = []
    for r in rows:
        cells = [r.id, r.location]
        cells += ["absent" if v is None else fmt_range(v[0], v[1], units) for v in r.values]
        cells += [
            delta_text(r, i, "gb" if units == "both" else units) for i in range(1, len(names))
        ]
        body.append(cells)
    out.append(table(headers, body, set(range(len(names) + 2, len(headers)))))
    if c.cancelled:
        out.append("(cancelled before every plan was compared)")
    return "\n".join(out)


def _counts_json(k: GpuCounts) -> dict[str, Any]:
    return {
        "arithmetic_min": k.arithmetic_min.gpus,
        "first_layout": k.first_layout.gpus,
        "first_layout_nodes": k.nodes,
        "layout": layout_json(k.first_layout.layout) if k.first_layout.layout else None,
        "validation": {
            "low_gpus": k.validation_low.gpus,
            "high_gpus": k.validation_high.gpus,
            "straddles": k.straddles,
        },
    }


def _side_json(s: Side) -> dict[str, Any]:
    out: dict[str, Any] = {"name": s.name, "config_hash": s.config_hash}
    est = s.estimate
    if est is None:
        return {**out, "error": s.error}
    h = est.heaviest
    out.update(
        {
            "world_size": est.world_size,
            "verdict": est.verdict,
            "reason": est.verdict_reason,
            "fit_peak": {"low_bytes": est.fit_peak.low, "high_bytes": est.fit_peak.high},
            "peak": {"low_bytes": h.peak.low, "high_bytes": h.peak.high},
            "limit_bytes": est.limit_bytes,
            "capacity_bytes": est.capacity_bytes,
            "host_peak_per_node": dict(
                zip(("low_bytes", "high_bytes"), est.nodes.host_peak, strict=True)
            ),
            "nvme_peak_per_node": dict(
                zip(("low_bytes", "high_bytes"), est.nodes.nvme_peak, strict=True)
            ),
        }
    )
    out["counts"] = _counts_json(s.counts) if s.counts else None
    if s.counts is None:
        out["counts_error"] = s.counts_error
    return out


def comparison_json(c: Comparison) -> dict[str, Any]:
    """The ``--json`` object (json_version 1): the plans, the inputs that differ and
    every ledger row matched by id, with deltas against the first plan."""

    def pair(v: tuple[int, int] | None) -> dict[str, int] | None:
        return None if v is None else {"low_bytes": v[0], "high_bytes": v[1]}

    return {
        "json_version": JSON_VERSION,
        "memplan_version": __version__,
        "formula_version": FORMULA_VERSION,
        "baseline": c.sides[0].name,
        "cancelled": c.cancelled,
        "plans": [_side_json(s) for s in c.sides],
        "inputs": [
            {
                "path": d.path,
                "values": [None if v is ABSENT else v for v in d.values],
                "absent": [v is ABSENT for v in d.values],
            }
            for d in c.inputs
        ],
        "rows": [
            {
                "id": r.id,
                "label": r.label,
                "location": r.location,
                "values": [pair(v) for v in r.values],
                "deltas": [pair(r.delta(i)) for i in range(1, len(r.values))],
                "differs": r.differs,
            }
            for r in c.rows
        ],
    }


def cmd_compare(args: argparse.Namespace) -> int:
    named = load_sides(args)
    c = compare(named, with_counts=not args.no_counts, search_budget_s=search_budget(args))
    if args.json:
        print(json.dumps(comparison_json(c), indent=2))
    else:
        print(render_comparison(c, args.units, args.all_rows))
    return EXIT_OK


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("compare", help="compare two or more plans side by side")
    p.add_argument(
        "plans", nargs="+", metavar="PLAN", help=".memplan files (the first is the baseline)"
    )
    p.add_argument(
        "--set",
        metavar="SECTION.FIELD=VALUE",
        action="append",
        default=[],
        help="with one PLAN: compare it with a copy carrying these overrides",
    )
    p.add_argument("--json", action="store_true", help="emit the documented JSON object")
    p.add_argument("--no-counts", action="store_true", help="skip the GPU-count searches")
    search_budget_arg(p)
    p.add_argument("--all-rows", action="store_true", help="list every row, not only changed ones")
    p.add_argument("--units", choices=["gb", "gib", "both"], default="both")
    p.set_defaults(handler=cmd_compare)
