"""Record the golden CLI outputs (see ``cases.py``): ``python -m tests.golden.capture``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.golden.cases import CASES, COMMANDS, NO_SEARCH

OUT = Path(__file__).parent / "out"


def command_args(name: str, command: str) -> list[str]:
    """The ``memplan`` arguments of one golden command."""
    args = [*COMMANDS[command], *CASES[name]]
    if name in NO_SEARCH and command.startswith("estimate"):
        args.append("--no-counts")
    return args


def run_case(name: str, command: str) -> tuple[int, str]:
    """Exit code and output of one golden command, in a fresh process."""
    proc = subprocess.run(
        [sys.executable, "-m", "gui", *command_args(name, command)],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).parents[2],
    )
    return proc.returncode, proc.stdout + proc.stderr


def wanted() -> list[tuple[str, str]]:
    return [
        (name, cmd)
        for name in CASES
        for cmd in COMMANDS
        if not (name in NO_SEARCH and cmd == "layouts.txt")
    ]


def main() -> None:
    OUT.mkdir(exist_ok=True)
    for name, cmd in wanted():
        rc, text = run_case(name, cmd)
        (OUT / f"{name}.{cmd}").write_text(f"exit {rc}\n{text}", encoding="utf-8")
        print(f"{name}.{cmd}: exit {rc}, {len(text)} chars")


if __name__ == "__main__":
    main()
