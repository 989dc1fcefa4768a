"""The engine's command line: one parser any front end can mount.

The ``memplan`` console script (``gui/__main__.py``) mounts it and adds the GUI and
``report``, so the engine never depends on Qt. Subcommands live by theme:
``plan_commands`` (estimate, new, validate, models), ``layout_commands`` (layouts),
``export_commands`` (export, import), ``run_commands`` (probe, validate-run,
calibrate), ``compare_commands`` (compare) and ``sweep_commands`` (sweep); ``common``
holds what they share, ``text`` and ``json_form`` the two output forms. Exit codes:
0 success, 1 a bad plan or file (the message names the field path), 2 wrong usage.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from engine.cli import (
    compare_commands,
    export_commands,
    layout_commands,
    plan_commands,
    run_commands,
    sweep_commands,
    trace_command,
)
from engine.cli.common import EXIT_OK, EXIT_USAGE, CliError, Handler, quiet_broken_pipe


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the engine's subcommands to a front end's parser."""
    plan_commands.register(sub)
    layout_commands.register(sub)
    export_commands.register(sub)
    run_commands.register(sub)
    compare_commands.register(sub)
    sweep_commands.register(sub)
    trace_command.register(sub)


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
