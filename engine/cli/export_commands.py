"""The ``export`` and ``import`` subcommands: framework configs out of and into plans.

``export`` refuses a plan that does not validate (the validator's messages, exit 1), so
no framework is handed a job MemPlan itself rejects; what the file cannot express goes
to stderr (and into the file as comments where the format has them). ``-o`` refuses to
replace an existing file — the main one or a companion beside it — without ``--force``,
and never writes over a FIFO or a device (:mod:`engine.fileio.atomic`). ``--check`` loads
the file's data with the framework's own config classes when installed. ``import`` reads any
of the five kinds over the plan named (or the default plan) and writes a .memplan file,
listing every ``auto`` it resolved and every key it did not understand.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engine.cli.common import EXIT_BAD_PLAN, EXIT_OK, CliError, load_plan, plan_args
from engine.exports import FORMATS, Export
from engine.exports.check import check_export
from engine.exports.common import existing, export_files
from engine.exports.importers import KINDS, import_file
from engine.fileio.atomic import write_atomic
from engine.fileio.oneline import one_line
from engine.legality.checks import plan_problems
from engine.plan import Plan
from engine.planfile import PlanFile, dumps, save


def _note(line: str) -> None:
    """One line on stderr: plan text in it (a model's name in a reason) is made one
    printable line, so no control character reaches the terminal."""
    print(f"memplan: {one_line(line)}", file=sys.stderr)


def refuse_invalid(plan: Plan) -> None:
    """Raise a CliError with the validator's messages if the plan cannot run."""
    problems = plan_problems(plan)
    if problems:
        msgs = "; ".join(p.message for p in problems)
        raise CliError(f"plan does not validate, not exported: {msgs}", EXIT_BAD_PLAN)


def _write(exp: Export, output: str, force: bool) -> None:
    files = export_files(exp, output)
    there = existing([p for p, _ in files])
    if there and not force:
        names = ", ".join(str(p) for p in there)
        verb = "exists" if len(there) == 1 else "exist"
        raise CliError(f"{names} already {verb}; pass --force to overwrite")
    for path, text in files:
        try:
            write_atomic(text.encode("utf-8"), path)
        except OSError as exc:
            raise CliError(f"cannot write {path}: {exc.strerror or exc}") from exc
        print(f"wrote {path} ({exp.format})")


def cmd_export(args: argparse.Namespace) -> int:
    plan, _ = load_plan(args)
    refuse_invalid(plan)
    exp = FORMATS[args.format].export(plan)
    if args.output:
        _write(exp, args.output, args.force)
    else:
        sys.stdout.write(exp.text)
        for e in exp.extras:
            _note(f"note: companion file {e.filename} not written (use -o FILE to write it)")
    _note(f"note: targets {exp.target}")
    for u in exp.unexpressed:
        _note(f"not expressed: {u}")
    for a in exp.advice:
        _note(f"note: {a}")
    if not args.check:
        return EXIT_OK
    failed = False
    for r in check_export(exp, plan):
        word = "accepted" if r.ok else ("not checked" if not r.available else "REFUSED")
        _note(f"check ({r.format}): {word}: {r.message}")
        failed |= r.available and not r.ok
    return EXIT_BAD_PLAN if failed else EXIT_OK


def cmd_import(args: argparse.Namespace) -> int:
    base, _ = load_plan(args)
    try:  # import_file refuses in one sentence naming the file (ImportRefused)
        got = import_file(args.file, base, args.kind)
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    for r in got.resolutions:
        _note(f"resolved: {r}")
    for w in got.warnings:
        _note(f"warning: {w}")
    for p in plan_problems(got.plan):
        _note(f"warning: the imported plan does not validate: {p.message}")
    name = args.name or f"imported from {Path(args.file).name}"
    pf = PlanFile(name=name, plan=got.plan)
    if args.output:
        try:
            save(pf, args.output)
        except OSError as exc:
            raise CliError(f"cannot write {args.output}: {exc.strerror or exc}") from exc
        print(f"wrote {args.output}")
    else:
        sys.stdout.write(dumps(pf))
    return EXIT_OK


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("export", help="write a framework config from a plan")
    plan_args(p)
    p.add_argument("--format", required=True, choices=sorted(FORMATS))
    p.add_argument(
        "-o", "--output", metavar="FILE", help="write here (companions beside it), not stdout"
    )
    p.add_argument(
        "--force", action="store_true", help="overwrite the file and companions if they exist"
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="load the file's values with the framework's own config classes (when installed)",
    )
    p.set_defaults(handler=cmd_export)

    p = sub.add_parser("import", help="a plan from a framework config or a model folder")
    p.add_argument("file", metavar="FILE", help="; ".join(KINDS.values()))
    p.add_argument("--kind", choices=sorted(KINDS), help="the file's kind (default: detected)")
    p.add_argument("--base", dest="plan", metavar="PLAN", help="plan to import over")
    p.add_argument("--preset", metavar="NAME", help="model preset of the base plan")
    p.add_argument("--set", metavar="SECTION.FIELD=VALUE", action="append", default=[])
    p.add_argument("--name", help="name of the written plan")
    p.add_argument("-o", "--output", metavar="PLAN", help="write a .memplan file here")
    p.set_defaults(handler=cmd_import)
