"""The ``memplan`` console script.

Mounts the engine's subcommands (which import no Qt, so ``memplan estimate`` starts
fast) and adds the front-end commands that need Qt. With no subcommand, or with a
``.memplan`` file as the only argument, it starts the desktop GUI. ``memplan report`` runs
as a one-shot process (:mod:`gui.workers.one_shot`): no interpreter teardown.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

# MemPlan installs no pydantic plugins, yet pydantic looks for them (a scan of every
# installed distribution's entry points) when the first model class is built, unless
# told not to: the console script tells it, before any engine import. A caller of the
# engine as a library keeps its own plugins (nothing below ``gui.__main__`` sets this).
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

from gui.display import has_display
from gui.workers import one_shot

Mount = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]
"""A hook that adds a subcommand to the ``memplan`` parser."""

GUI_NOT_READY = "memplan: the desktop GUI is not available in this build; use `memplan estimate`"


def start_gui(path: str | None) -> int:
    """Start the GUI, or say in one line why it cannot start."""
    if not has_display():
        print(
            "memplan: no display available (DISPLAY/WAYLAND_DISPLAY unset); run "
            "`memplan estimate` for the command line, or set QT_QPA_PLATFORM=offscreen",
            file=sys.stderr,
        )
        return 1
    try:
        from gui.app import main as gui_main
    except ImportError:
        print(GUI_NOT_READY, file=sys.stderr)
        return 1
    return gui_main(path)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``memplan`` parser: every subcommand, or (``command``: the one a command line
    names) only what that command needs, so ``memplan report`` imports no other command's
    module (:func:`engine.cli.register`)."""
    from engine import cli

    parser = argparse.ArgumentParser(
        prog="memplan",
        description="MemPlan: GPU, host-RAM and NVMe memory of LLM training jobs. "
        "Without a command, opens the desktop app (optionally on FILE.memplan).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    whole = command not in {*cli.COMMAND_NAMES, *FRONTEND_COMMANDS, "gui"}
    if whole or command in cli.COMMAND_NAMES:
        cli.register(sub, None if whole else command)
    gui_p = sub.add_parser("gui", help="open the desktop app (the default)")
    gui_p.add_argument("plan", nargs="?", metavar="FILE", help="a .memplan file to open")
    gui_p.set_defaults(handler=None)
    for name, hook in FRONTEND_COMMANDS.items():
        if whole or command == name:
            hook(sub)
    return parser


def _register_report(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from gui.report.cli import register  # imports no Qt until the command runs

    register(sub)


FRONTEND_COMMANDS: dict[str, Mount] = {"report": _register_report}
"""Registration hooks of Qt-needing subcommands, by subcommand name."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: the process's own, ``sys.argv``)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if not args_list:
        return start_gui(None)
    if len(args_list) == 1 and args_list[0].endswith(".memplan"):
        return start_gui(args_list[0])
    if args_list[0] not in one_shot.COMMANDS:
        return run_command(args_list)
    code = run_command(args_list)
    if argv is None:  # the process's own command line: nothing runs after it
        one_shot.end_process(code)
    return code


def run_command(args_list: list[str]) -> int:
    """Parse and run a subcommand (the GUI's included)."""
    from engine import cli

    parser = build_parser(cli.command_of(args_list))
    args = parser.parse_args(args_list)
    if args.command == "gui":
        return start_gui(args.plan)
    return cli.run(args)


if __name__ == "__main__":
    raise SystemExit(main())
