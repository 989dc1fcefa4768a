"""The CLI mounts only the subcommand it runs: ``engine.cli.COMMANDS`` must name, for
each subcommand module, exactly the subcommands its ``register`` adds, or a command
would be missing from (or mounted by the wrong module for) its own command line."""

from __future__ import annotations

import argparse
import subprocess
import sys
from importlib import import_module

import pytest

from engine import cli
from gui.__main__ import build_parser


def _registered(module: str) -> list[str]:
    sub = argparse.ArgumentParser().add_subparsers()
    import_module(f"engine.cli.{module}").register(sub)
    return list(sub.choices)


@pytest.mark.parametrize("module", sorted(cli.COMMANDS))
def test_commands_table_matches_register(module: str) -> None:
    assert tuple(_registered(module)) == cli.COMMANDS[module]


def test_whole_parser_lists_every_command_in_order() -> None:
    """Help (no command named) mounts every module, in the table's order, then the GUI's."""
    sub = build_parser()._subparsers._group_actions[0]  # type: ignore[union-attr]
    names = list(sub.choices)  # type: ignore[attr-defined]
    engine_names = [n for names in cli.COMMANDS.values() for n in names]
    assert names == [*engine_names, "gui", "report"]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["estimate", "--json"], ["estimate", "new", "validate", "models", "gui"]),
        (["report", "-o", "r.pdf"], ["gui", "report"]),
        (["sweep"], ["sweep", "gui"]),
        (["--help"], None),
        (["bogus"], None),
    ],
)
def test_a_command_line_mounts_its_own_module(argv: list[str], expected: list[str] | None) -> None:
    parser = build_parser(cli.command_of(argv))
    names = list(parser._subparsers._group_actions[0].choices)  # type: ignore[union-attr,attr-defined]
    if expected is None:  # help or a typo: every command, so argparse can list them
        assert len(names) == len(cli.COMMAND_NAMES) + 2
    else:
        assert names == expected


def test_report_command_line_imports_no_other_command() -> None:
    """Checked in a fresh interpreter: parsing ``report`` loads none of the engine's
    subcommand modules (the probe, the importers, the trace runner…)."""
    code = (
        "import sys; from gui.__main__ import build_parser; "
        "build_parser('report').parse_args(['report', '-o', 'r.pdf']); "
        "print(sorted(m for m in sys.modules if m.startswith('engine.cli.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['engine.cli.arg_types', 'engine.cli.common']"
