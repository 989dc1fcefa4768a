"""The ``layouts`` subcommand."""

from __future__ import annotations

import argparse
import json
from typing import Any

from pydantic import ValidationError

from engine.analysis import analysis
from engine.cli.arg_types import gpu_count
from engine.cli.common import (
    EXIT_OK,
    CliError,
    load_plan,
    plan_args,
    search_budget,
    search_budget_arg,
)
from engine.cli.layout_json import counts_json, fit_json, lattice_json, levers_json
from engine.cli.text import render_counts, render_fit, render_levers
from engine.errors import PlanError
from engine.estimate import VERDICT_WORDS
from engine.layout.proofs.evaluate import Evaluator, Outcome
from engine.layout.shapes import Lattice, enumerate_layouts
from engine.plan import Plan, describe_validation_error, with_value
from engine.units import fmt_bytes, fmt_range


def _lattice(plan: Plan, gpus: int) -> tuple[Lattice, list[Outcome]]:
    """Every layout of ``gpus`` GPUs, and the estimate of each legal one."""
    lattice = enumerate_layouts(plan, gpus)
    ev = Evaluator(plan)
    return lattice, [ev(lay) for lay in lattice.legal]


def _lattice_text(lattice: Lattice, outcomes: list[Outcome], show_rejected: bool) -> str:
    gpus = lattice.world_size
    lines = [
        f"{len(lattice.legal)} legal and {len(lattice.rejected)} rejected layouts of {gpus} GPUs:"
    ]
    for lay, o in zip(lattice.legal, outcomes, strict=True):
        if not o.ok:
            lines.append(f"  {lay.label()}: cannot be estimated: {o.error}")
            continue
        verdict = VERDICT_WORDS[
            "fits" if o.fits_high else ("straddles" if o.fits_low else "does_not_fit")
        ].lower()
        lines.append(
            f"  {lay.label()}: peak {fmt_range(o.low, o.high)}, "
            f"headroom {fmt_bytes(o.headroom)}, {verdict}"
        )
    if show_rejected:
        lines.append("Rejected:")
        lines += [f"  {r.layout.label()}: {'; '.join(r.reasons)}" for r in lattice.rejected]
    return "\n".join(lines)


def _search_bound(plan: Plan, max_gpus: int | None) -> Plan:
    """``--max-gpus N`` is the plan's layout search bound (``policy.max_gpus``)."""
    if max_gpus is None:
        return plan
    try:
        return with_value(plan, "policy.max_gpus", max_gpus)
    except ValidationError as exc:
        raise CliError("--max-gpus: " + "; ".join(describe_validation_error(exc))) from exc


def cmd_layouts(args: argparse.Namespace) -> int:
    plan, _ = load_plan(args)
    a = analysis(_search_bound(plan, args.max_gpus), search_budget(args))
    try:
        if args.json:
            doc: dict[str, Any]
            if args.gpus:
                doc = lattice_json(a.config_hash, *_lattice(plan, args.gpus))
            else:
                doc = counts_json(a.config_hash, a.counts)
                if not args.no_levers:
                    doc["levers"] = levers_json(a.levers)
            if args.fit:
                doc["fit"] = fit_json(a.fit)
            print(json.dumps(doc, indent=2))
            return EXIT_OK
        if args.gpus:
            print(_lattice_text(*_lattice(plan, args.gpus), not args.hide_rejected))
        else:
            print(render_counts(a.counts))
            if not args.no_levers:
                print("\n" + render_levers(a.levers, a.counts))
        if args.fit:
            print("\n" + render_fit(a.fit))
    except PlanError as exc:
        raise CliError(f"plan cannot be computed: {exc}") from exc
    return EXIT_OK


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("layouts", help="GPU counts and layouts of a plan")
    plan_args(p)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--gpus", type=gpu_count, metavar="N", help="list every layout of N GPUs")
    g.add_argument("--max-gpus", type=int, metavar="N", help="search the counts up to N GPUs")
    p.add_argument("--hide-rejected", action="store_true", help="with --gpus: legal ones only")
    p.add_argument(
        "--fit",
        action="store_true",
        help="also the largest micro-batch and longest sequence that fit the plan's layout",
    )
    p.add_argument(
        "--no-levers",
        action="store_true",
        help="skip the fit levers (recompute, offload, LoRA, QLoRA, micro-batch 1)",
    )
    search_budget_arg(p)
    p.add_argument("--json", action="store_true", help="emit the documented JSON object")
    p.set_defaults(handler=cmd_layouts)
