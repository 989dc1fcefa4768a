"""The ``layouts`` and ``export`` subcommands, and the counts text ``estimate`` prints.

Registered by :func:`engine.cli.register`; kept apart so the CLI module stays small.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engine import cli
from engine.errors import PlanError
from engine.exports import EXPORTERS
from engine.layout.counts import Count, GpuCounts, gpu_counts
from engine.layout.evaluate import Evaluator
from engine.layout.lattice import enumerate_layouts
from engine.plan import Plan
from engine.units import fmt_bytes, fmt_range


def _count_line(title: str, c: Count) -> str:
    head = f"{c.gpus} GPUs" if c.gpus is not None else "none found"
    return f"  {title}: {head}\n    {c.reason}"


def render_counts(counts: GpuCounts) -> str:
    """The three counts, alternatives and the rejected tally, in words."""
    out = [
        f"GPU counts (searched up to {counts.max_gpus} GPUs, {counts.gpus_per_node} per node, "
        f"rounding to {counts.rounding}s; {counts.estimates} estimates):",
        _count_line("1. arithmetic minimum", counts.arithmetic_min),
        _count_line("2. first legal layout (procurement)", counts.first_layout),
        f"  3. validation range: {counts.validation_low.gpus}–{counts.validation_high.gpus} "
        f"GPUs\n    {counts.validation_reason}",
    ]
    if counts.alternatives:
        out.append("  Alternatives at the procurement size, by headroom:")
        out += [
            f"    {o.layout.label()}: peak {fmt_bytes(o.high)}, headroom {fmt_bytes(o.headroom)}"
            for o in counts.alternatives
        ]
    if counts.rejected:
        out.append(
            f"  {len(counts.rejected)} layouts of that size rejected (memplan layouts "
            f"--gpus N lists them with reasons)"
        )
    out += [f"  Note: {n}" for n in counts.notes]
    return "\n".join(out)


def counts_text(plan: Plan, max_gpus: int | None = None) -> str:
    """The text block ``memplan estimate`` appends (the GUI uses gpu_counts directly)."""
    return render_counts(gpu_counts(plan, max_gpus))


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
        verdict = "fits" if o.fits_high else ("straddles" if o.fits_low else "does not fit")
        lines.append(
            f"  {lay.label()}: peak {fmt_range(o.low, o.high)}, "
            f"headroom {fmt_bytes(o.headroom)}, {verdict}"
        )
    if show_rejected:
        lines.append("Rejected:")
        lines += [f"  {r.layout.label()}: {'; '.join(r.reasons)}" for r in lattice.rejected]
    return "\n".join(lines)


def cmd_layouts(args: argparse.Namespace) -> int:
    plan, _ = cli.load_plan(args)
    try:
        if args.gpus:
            print(_lattice_text(plan, args.gpus, not args.hide_rejected))
        else:
            print(counts_text(plan, args.max_gpus))
    except PlanError as exc:
        raise cli.CliError(f"plan cannot be computed: {exc}") from exc
    return cli.EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    plan, _ = cli.load_plan(args)
    exp = EXPORTERS[args.format](plan)
    if args.output:
        try:
            Path(args.output).write_text(exp.text, encoding="utf-8")
        except OSError as exc:
            raise cli.CliError(f"cannot write {args.output}: {exc.strerror or exc}") from exc
        print(f"wrote {args.output} ({exp.format})")
    else:
        sys.stdout.write(exp.text)
    for note in exp.notes:
        print(f"memplan: note: {note}", file=sys.stderr)
    return cli.EXIT_OK


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("layouts", help="GPU counts and layouts of a plan")
    cli._plan_args(p)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--gpus", type=int, metavar="N", help="list every layout of N GPUs")
    g.add_argument("--max-gpus", type=int, metavar="N", help="search the counts up to N GPUs")
    p.add_argument("--hide-rejected", action="store_true", help="with --gpus: legal ones only")
    p.set_defaults(handler=cmd_layouts)

    p = sub.add_parser("export", help="write a framework config from a plan")
    cli._plan_args(p)
    p.add_argument("--format", required=True, choices=sorted(EXPORTERS))
    p.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    p.set_defaults(handler=cmd_export)
