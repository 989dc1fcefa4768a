"""The engine's command line: one parser any front end can mount.

The ``memplan`` console script (``gui/__main__.py``) mounts it and adds the GUI and
``report``, so the engine never depends on Qt. Subcommands live by theme:
``plan_commands`` (estimate, new, validate, models), ``layout_commands`` (layouts),
``export_commands`` (export, import), ``run_commands`` (probe, validate-run,
calibrate), ``compare_commands`` (compare), ``sweep_commands`` (sweep) and ``published_command``
(validate-published); ``common``
holds what they share, ``text`` and ``json_form`` the two output forms. Exit codes:
0 success, 1 a bad plan or file (the message names the field path), 2 wrong usage.

A command line runs one subcommand, so only that subcommand's module is imported
(:func:`command_of` reads its name off the arguments): ``memplan report`` does not load
the probe, the trace runner or the importers. Help, and a name that is not a
subcommand, get the whole parser.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import import_module

from engine.cli.common import EXIT_OK, EXIT_USAGE, CliError, Handler, quiet_broken_pipe

COMMANDS: dict[str, tuple[str, ...]] = {
    "plan_commands": ("estimate", "new", "validate", "models"),
    "layout_commands": ("layouts",),
    "export_commands": ("export", "import"),
    "run_commands": ("probe", "validate-run", "calibrate"),
    "compare_commands": ("compare",),
    "sweep_commands": ("sweep",),
    "trace_command": ("trace",),
    "published_command": ("validate-published",),
}
"""Each subcommand module of this package (in ``--help`` order) and the subcommands its
``register`` adds (``tests/engine/cli/test_lazy_commands.py`` holds the two to agree)."""
COMMAND_NAMES = frozenset(name for names in COMMANDS.values() for name in names)


def command_of(argv: Sequence[str]) -> str | None:
    """The subcommand an argument list names (its first argument, when that is not an
    option); None for none, or for help asked before any subcommand."""
    return argv[0] if argv and not argv[0].startswith("-") else None


def modules_for(command: str | None) -> list[str]:
    """The subcommand modules to mount for ``command``: its own module, or every module
    when it names none of them (help, a typo, another front end's command)."""
    own = [m for m, names in COMMANDS.items() if command in names]
    return own or list(COMMANDS)


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], command: str | None = None
) -> None:
    """Add the engine's subcommands to a front end's parser: all of them, or only the
    module of ``command`` when that names one of them (see :func:`modules_for`)."""
    for module in modules_for(command):
        import_module(f"engine.cli.{module}").register(sub)


def build_parser(prog: str = "memplan", command: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, description="MemPlan: GPU, host-RAM and NVMe memory of LLM training jobs."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    register(sub, command)
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
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(command=command_of(args_list))
    args = parser.parse_args(args_list)
    if args.command is None:
        parser.print_usage(sys.stderr)
        return EXIT_USAGE
    return run(args)
