"""`memplan report` as a one-shot process (gui.workers.one_shot): the collector paused for the
command and given back after it; the process's own command line ending without the
interpreter's teardown, yet with its exit code and every line it printed."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gui.__main__ import main
from gui.workers import one_shot


def test_collector_paused_gives_back_its_former_state() -> None:
    """Off inside the block; on after it if it was on, off if it was off (a caller that
    switched it off itself keeps it off), also when the block raises."""
    assert gc.isenabled()
    with one_shot.collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), one_shot.collector_paused():
        raise RuntimeError
    assert gc.isenabled()
    gc.disable()
    try:
        with one_shot.collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_report_in_process_returns_and_restores_the_collector(tmp_path: Path) -> None:
    """A call with its own arguments (a test, a script) gets the exit code back, not the
    end of its process, and the collector on again."""
    out = tmp_path / "r.pdf"
    assert main(["report", "--no-levers", "-o", str(out)]) == 0
    assert gc.isenabled()
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
