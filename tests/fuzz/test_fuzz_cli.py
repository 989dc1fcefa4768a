"""The command line on bad arguments and files: exit 1 or 2 with a one-line message,
never a traceback — in-process for a large sample, and a few real processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.fuzz.run_cli import run_cli

ROOT = Path(__file__).resolve().parents[2]


def test_a_sample_of_bad_commands_never_crashes(tmp_path: Path) -> None:
    tally = run_cli(150, 7, tmp_path)
    assert tally.ok, tally.problems()
    assert tally.outcomes["exit 1"] > 0 and tally.outcomes["exit 2"] > 0


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["layouts", "--gpus", "-1"], {2}, "expected a whole number from 1 to 1,000,000"),
        (["layouts", "--max-gpus", "0"], {1, 2}, "--max-gpus"),
        (["estimate", "--set", "batch.seq_len=" + "9" * 5000], {1}, "plan.batch.seq_len"),
        (["validate", "DEEP"], {1}, "nests more than 64 levels"),
    ],
)
def test_real_processes_print_one_line_and_no_traceback(
    tmp_path: Path, args: list[str], code: set[int], words: str
) -> None:
    deep = tmp_path / "deep.memplan"
    deep.write_text("[" * 1000, encoding="utf-8")
    argv = [str(deep) if a == "DEEP" else a for a in args]
    proc = subprocess.run(
        [sys.executable, "-m", "gui", *argv], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert proc.returncode in code
    assert "Traceback" not in proc.stderr and words in proc.stderr
    assert len(proc.stderr.strip().splitlines()[-1]) < 400
