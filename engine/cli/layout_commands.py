"""The ``layouts`` and ``export`` subcommands."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engine.cli.arg_types import gpu_count
from engine.cli.common import EXIT_OK, CliError, load_plan, plan_args
from engine.cli.text import counts_text
from engine.errors import PlanError
from engine.estimate import VERDICT_WORDS
from engine.exports import EXPORTERS
from engine.layout.evaluate import Evaluator
from engine.layout.lattice import enumerate_layouts
from engine.plan import Plan
from engine.units import fmt_bytes, fmt_range


def _lattice_text(plan: Plan, gpus: int, show_rejected: bool) -> str:
    lattice = enumerate_layouts(plan, gpus)
    ev = Evaluator(plan)
    lines = [
        f"{len(lattice.legal)} legal and {len(lattice.rejected)} rejected layouts of {gpus} GPUs:"
    ]
    for lay in lattice.legal:
        o = ev(lay)
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


def cmd_layouts(args: argparse.Namespace) -> int:
    plan, _ = load_plan(args)
    try:
        if args.gpus:
            print(_lattice_text(plan, args.gpus, not args.hide_rejected))
        else:
            print(counts_text(plan, args.max_gpus))
    except PlanError as exc:
        raise CliError(f"plan cannot be computed: {exc}") from exc
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    plan, _ = load_plan(args)
    exp = EXPORTERS[args.format](plan)
    if args.output:
        try:
            Path(args.output).write_text(exp.text, encoding="utf-8")
        except OSError as exc:
            raise CliError(f"cannot write {args.output}: {exc.strerror or exc}") from exc
        print(f"wrote {args.output} ({exp.format})")
    else:
        sys.stdout.write(exp.text)
    for note in exp.notes:
        print(f"memplan: note: {note}", file=sys.stderr)
    return EXIT_OK


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("layouts", help="GPU counts and layouts of a plan")
    plan_args(p)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--gpus", type=gpu_count, metavar="N", help="list every layout of N GPUs")
    g.add_argument("--max-gpus", type=gpu_count, metavar="N", help="search the counts up to N GPUs")
    p.add_argument("--hide-rejected", action="store_true", help="with --gpus: legal ones only")
    p.set_defaults(handler=cmd_layouts)

    p = sub.add_parser("export", help="write a framework config from a plan")
    plan_args(p)
    p.add_argument("--format", required=True, choices=sorted(EXPORTERS))
    p.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    p.set_defaults(handler=cmd_export)
