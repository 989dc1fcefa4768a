"""``memplan validate-published``: MemPlan against published real-GPU measurements.

Every case of the suite (``tests/data/published/cases.jsonl``, or ``--cases FILE``) is
built, estimated and compared on the figure its source measured (allocated, reserved,
device, or only that it ran: see :mod:`engine.validation.published`). The table has one
line per case; the summary line says how many expressible cases are inside, the median
|error| and how many verdicts contradict a run that happened. ``--json`` prints the same.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from engine import FORMULA_VERSION, __version__
from engine.cli.common import EXIT_OK, CliError
from engine.cli.json_form import JSON_VERSION
from engine.cli.text import table
from engine.units import GiB
from engine.validation.published import CASES_PATH, CaseError, CaseResult, Summary, run_suite

HEADERS = [
    "case",
    "stack",
    "basis",
    "published GiB",
    "MemPlan GiB",
    "error",
    "inside",
    "verdict",
    "contradicts",
    "expressible",
]
"""The table's columns (the README pastes the table this prints)."""


def _gib(n: float) -> str:
    return f"{n / GiB:.1f}"


def published_text(r: CaseResult) -> str:
    c = r.case
    if c.low_gib is None or c.high_gib is None:
        return "ran"
    if c.low_gib == c.high_gib:
        return f"{c.low_gib:.1f}"
    return f"{c.low_gib:.1f}–{c.high_gib:.1f}"


def result_row(r: CaseResult) -> list[str]:
    """One line of the table: a refused plan shows its reason in the MemPlan column."""
    c = r.case
    memplan = "refused" if r.low is None or r.high is None else f"{_gib(r.low)}–{_gib(r.high)}"
    error = "—" if r.error_pct is None else f"{r.error_pct:+.1f} %"
    inside = "yes" if r.inside else "no"
    return [
        c.id,
        c.stack,
        c.basis,
        published_text(r),
        memplan,
        error,
        inside if c.expressible else f"({inside})",
        r.verdict or "—",
        "YES" if r.contradicts else "",
        "yes" if c.expressible else "no",
    ]


def render(results: tuple[CaseResult, ...], summary: Summary) -> str:
    """The table, the knobs each not-expressible case lacks, refusals, and the summary."""
    out = [
        "MemPlan against published real-GPU measurements (error: MemPlan's midpoint against "
        "the published one, + = MemPlan more; inside of a not-expressible case in brackets):",
        table(HEADERS, [result_row(r) for r in results], {3, 4, 5}),
    ]
    missing = [f"  {r.case.id}: {'; '.join(r.case.missing)}" for r in results if r.case.missing]
    if missing:
        out += ["Not expressible (the knob MemPlan lacks):", *missing]
    refused = [f"  {r.case.id}: {r.problem}" for r in results if r.problem]
    if refused:
        out += ["Refused by MemPlan:", *refused]
    out.append(f"Summary: {summary.line()}.")
    return "\n".join(out)


def result_json(r: CaseResult) -> dict[str, Any]:
    c = r.case
    return {
        "id": c.id,
        "stack": c.stack,
        "url": c.url,
        "basis": c.basis,
        "published_gib": None if c.low_gib is None else {"low": c.low_gib, "high": c.high_gib},
        "memplan_bytes": None if r.low is None else {"low": r.low, "high": r.high},
        "capacity_bytes": r.capacity,
        "error_pct": r.error_pct,
        "inside": r.inside,
        "verdict": r.verdict,
        "contradicts": r.contradicts,
        "expressible": c.expressible,
        "missing": list(c.missing),
        "problem": r.problem,
    }


def suite_json(results: tuple[CaseResult, ...], summary: Summary) -> dict[str, Any]:
    """The ``--json`` object (json_version 1)."""
    return {
        "json_version": JSON_VERSION,
        "memplan_version": __version__,
        "formula_version": FORMULA_VERSION,
        "summary": {
            "cases": summary.cases,
            "sources": summary.sources,
            "expressible": summary.expressible,
            "inside": summary.inside,
            "median_abs_error_pct": summary.median_abs_error_pct,
            "contradicted": summary.contradicted,
            "contradicted_all": summary.contradicted_all,
            "line": summary.line(),
        },
        "cases": [result_json(r) for r in results],
    }


def cmd_validate_published(args: argparse.Namespace) -> int:
    path = Path(args.cases) if args.cases else CASES_PATH
    if not path.is_file():
        raise CliError(f"{path}: no published-measurement suite there (it ships with the tests)")
    try:
        results, summary = run_suite(path)
    except CaseError as exc:
        raise CliError(f"{path}: {exc}") from exc
    if args.json:
        print(json.dumps(suite_json(results, summary), indent=2))
    else:
        print(render(results, summary))
    return EXIT_OK


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "validate-published",
        help="MemPlan against published real-GPU measurements (the validation suite)",
    )
    p.add_argument(
        "--cases",
        metavar="FILE",
        help="a JSON-lines file of cases (default: the suite in tests/data/published)",
    )
    p.add_argument("--json", action="store_true", help="emit the documented JSON object")
    p.set_defaults(handler=cmd_validate_published)
