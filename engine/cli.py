"""The engine's command line: ``estimate``, ``new``, ``validate`` and friends.

Built as a parser any front end can mount (the ``memplan`` console script in
``gui/__main__.py`` adds the GUI and ``report``), so the engine never depends on Qt.
Exit codes: 0 success, 1 a bad plan or file (the message names the field path),
2 wrong usage.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from engine.errors import PlanError
from engine.estimate import estimate
from engine.estimate_json import estimate_json
from engine.plan import Plan, default_plan, describe_validation_error, with_values
from engine.planfile import PlanFile, PlanFileError, load, save
from engine.text_output import render

EXIT_OK, EXIT_BAD_PLAN, EXIT_USAGE = 0, 1, 2

Handler = Callable[[argparse.Namespace], int]


class CliError(Exception):
    """A user error with its exit code; the message is printed as one line."""

    def __init__(self, message: str, code: int = EXIT_BAD_PLAN) -> None:
        super().__init__(message)
        self.code = code


def parse_set(item: str) -> tuple[str, Any]:
    """``section.field=value`` → (path, typed value). JSON values are typed (numbers,
    booleans, null, lists); anything that is not JSON is taken as a string."""
    if "=" not in item:
        raise CliError(f"--set expects section.field=value, got {item!r}", EXIT_USAGE)
    path, raw = item.split("=", 1)
    path = path.strip()
    if not path or "." not in path:
        raise CliError(
            f"--set needs a dotted field path like batch.seq_len, got {path!r}", EXIT_USAGE
        )
    try:
        value: Any = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return path, value


def apply_sets(plan: Plan, items: Sequence[str]) -> Plan:
    """Apply ``--set`` overrides with the same validation as a file."""
    if not items:
        return plan
    changes = dict(parse_set(i) for i in items)
    try:
        return with_values(plan, changes)
    except KeyError as exc:
        raise CliError(f"--set: {exc.args[0]}") from exc
    except ValidationError as exc:
        problems = describe_validation_error(exc, "plan")
        raise CliError("; ".join(problems)) from exc


def load_plan(args: argparse.Namespace) -> tuple[Plan, PlanFile | None]:
    """The plan named on the command line (file, preset or default) with overrides."""
    pf: PlanFile | None = None
    if getattr(args, "plan", None):
        try:
            pf = load(args.plan)
        except PlanFileError as exc:
            raise CliError(f"{args.plan}: {exc}") from exc
        plan = pf.plan
        for msg in pf.extra_messages:
            print(f"memplan: note: {msg}", file=sys.stderr)
    else:
        plan = default_plan()
    if getattr(args, "preset", None):
        plan = _with_model(plan, args.preset)
    return apply_sets(plan, getattr(args, "set", None) or []), pf


def _with_model(plan: Plan, preset: str) -> Plan:
    from engine.presets_bridge import model_section_for

    try:
        model = model_section_for(preset)
    except KeyError as exc:
        raise CliError(str(exc.args[0])) from exc
    return Plan.model_validate(
        {**plan.model_dump(mode="json"), "model": model.model_dump(mode="json")}
    )


def cmd_estimate(args: argparse.Namespace) -> int:
    plan, _ = load_plan(args)
    try:
        est = estimate(plan)
    except PlanError as exc:
        raise CliError(f"plan cannot be computed: {exc}") from exc
    if args.json:
        doc = estimate_json(est, include_stages=args.stages)
        if args.reference:
            doc["reference"] = _reference_json(plan)
        print(json.dumps(doc, indent=2))
    else:
        print(
            render(est, args.units, stages=args.stages, phases=args.phases, formulas=args.formulas)
        )
        if args.reference:
            print(_reference_text(plan))
        if not args.no_counts:
            from engine.cli_layouts import counts_text

            print("\n" + counts_text(plan))
    return EXIT_OK


def _reference_json(plan: Plan) -> dict[str, Any] | None:
    from engine.reference.deepspeed_estimator import deepspeed_reference

    ref = deepspeed_reference(plan)
    if ref is None:
        return None
    return {
        "tool": "deepspeed",
        "stage": ref.stage,
        "cpu_bytes_per_node": ref.cpu_bytes_per_node,
        "gpu_bytes_per_gpu": ref.gpu_bytes_per_gpu,
        "formula": ref.formula,
    }


def _reference_text(plan: Plan) -> str:
    from engine.reference.deepspeed_estimator import deepspeed_reference
    from engine.units import fmt_bytes

    ref = deepspeed_reference(plan)
    if ref is None:
        return "\nReference (DeepSpeed estimator): only defined for ZeRO-2 and ZeRO-3 plans"
    return (
        f"\nReference — DeepSpeed's ZeRO-{ref.stage} cold estimator (model states only, "
        f"host × 1.5):\n  per GPU {fmt_bytes(ref.gpu_bytes_per_gpu)}; host RAM per node "
        f"{fmt_bytes(ref.cpu_bytes_per_node)}\n  ({ref.formula})"
    )


def cmd_new(args: argparse.Namespace) -> int:
    plan, _ = load_plan(args)
    out = Path(args.output)
    if out.exists() and not args.force:
        raise CliError(f"{out} exists; pass --force to overwrite it")
    try:
        save(PlanFile(plan=plan, name=args.name or out.stem), out)
    except OSError as exc:
        raise CliError(f"cannot write {out}: {exc.strerror or exc}") from exc
    print(f"wrote {out} (config {plan.config_hash()[:12]})")
    return EXIT_OK


def cmd_validate(args: argparse.Namespace) -> int:
    try:
        pf = load(args.plan)
    except PlanFileError as exc:
        for problem in exc.problems:
            print(f"memplan: {args.plan}: {problem}", file=sys.stderr)
        return EXIT_BAD_PLAN
    for msg in pf.extra_messages:
        print(f"note: {msg}")
    try:
        estimate(pf.plan)
    except PlanError as exc:
        print(f"memplan: {args.plan}: plan cannot be computed: {exc}", file=sys.stderr)
        return EXIT_BAD_PLAN
    print(f"{args.plan}: valid MemPlan plan '{pf.name}', config {pf.config_hash}")
    return EXIT_OK


def cmd_models(args: argparse.Namespace) -> int:
    from engine.models.presets import format_models_table

    print(format_models_table())
    return EXIT_OK


def _plan_args(p: argparse.ArgumentParser, plan_required: bool = False) -> None:
    if plan_required:
        p.add_argument("plan", metavar="PLAN", help="a .memplan file")
    else:
        p.add_argument(
            "plan",
            metavar="PLAN",
            nargs="?",
            help="a .memplan file (default: the built-in default plan)",
        )
    p.add_argument("--preset", metavar="NAME", help="use this model preset (see `memplan models`)")
    p.add_argument(
        "--set",
        metavar="SECTION.FIELD=VALUE",
        action="append",
        default=[],
        help="override one input (repeatable); values are JSON, else strings",
    )


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the engine's subcommands to a front end's parser."""
    p = sub.add_parser("estimate", help="estimate a plan's memory per rank")
    _plan_args(p)
    p.add_argument("--json", action="store_true", help="emit the documented JSON object")
    p.add_argument("--units", choices=["gb", "gib", "both"], default="both")
    p.add_argument("--stages", action="store_true", help="show every pipeline stage")
    p.add_argument("--phases", action="store_true", help="show HBM per step phase")
    p.add_argument("--formulas", action="store_true", help="show each row's formula and source")
    p.add_argument(
        "--reference",
        choices=["deepspeed"],
        help="also show another tool's estimate for comparison",
    )
    p.add_argument("--no-counts", action="store_true", help="skip the three GPU counts")
    p.set_defaults(handler=cmd_estimate)

    p = sub.add_parser("new", help="write a new .memplan file")
    p.add_argument("-o", "--output", required=True, metavar="FILE")
    p.add_argument("--name", help="plan name (default: the file name)")
    p.add_argument("--force", action="store_true", help="overwrite an existing file")
    p.add_argument("--preset", metavar="NAME", help="use this model preset")
    p.add_argument("--set", metavar="SECTION.FIELD=VALUE", action="append", default=[])
    p.set_defaults(handler=cmd_new, plan=None)

    p = sub.add_parser("validate", help="check a .memplan file")
    p.add_argument("plan", metavar="FILE")
    p.set_defaults(handler=cmd_validate)

    p = sub.add_parser("models", help="list the model presets with their parameter counts")
    p.set_defaults(handler=cmd_models)

    from engine import cli_layouts  # imports this module, so it is loaded late

    cli_layouts.register(sub)
    from engine import cli_validation

    cli_validation.register(sub)


def build_parser(prog: str = "memplan") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, description="MemPlan: GPU, host-RAM and NVMe memory of LLM training jobs."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    register(sub)
    return parser


def run(args: argparse.Namespace) -> int:
    """Run a parsed engine subcommand, turning user errors into messages and codes."""
    handler: Handler = args.handler
    try:
        return handler(args)
    except CliError as exc:
        print(f"memplan: {exc}", file=sys.stderr)
        return exc.code
    except BrokenPipeError:
        quiet_broken_pipe()
        return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_usage(sys.stderr)
        return EXIT_USAGE
    return run(args)


def quiet_broken_pipe() -> None:
    """Make ``memplan estimate | head`` end quietly when the reader closes the pipe."""
    with contextlib.suppress(BrokenPipeError):
        sys.stdout.flush()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":
    raise SystemExit(main())
