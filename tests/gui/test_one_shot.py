"""`memplan report` as a one-shot process (gui.workers.one_shot): the process's own command
line ending without the interpreter's teardown, yet with its exit code and every line it
printed; a call with its own arguments returning."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gui.__main__ import main


def test_report_in_process_returns(tmp_path: Path) -> None:
    """A call with its own arguments (a test, a script) gets the exit code back, not the
    end of its process."""
    out = tmp_path / "r.pdf"
    assert main(["report", "--no-levers", "-o", str(out)]) == 0
    assert out.stat().st_size > 0


def _memplan(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    return subprocess.run(
        [sys.executable, "-m", "gui", *args], capture_output=True, text=True, env=env, cwd=cwd
    )


def test_process_ends_with_its_code_and_its_output(tmp_path: Path) -> None:
    """`python -m gui report` through pipes: the success line on stdout, a complete PDF
    (its trailer written), and a failure's exit code 1 with its message on stderr —
    flushed before the process ended without its teardown."""
    root = Path(__file__).resolve().parents[2]
    ok = _memplan("report", "--no-levers", "-o", str(tmp_path / "r.pdf"), cwd=root)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith(f"wrote {tmp_path / 'r.pdf'} (")
    assert (tmp_path / "r.pdf").read_bytes().rstrip().endswith(b"%%EOF")
    bad = _memplan("report", "--preset", "no-such-model", "-o", str(tmp_path / "x.pdf"), cwd=root)
    assert bad.returncode == 1
    assert "no-such-model" in bad.stderr
    assert not (tmp_path / "x.pdf").exists()
