"""Real SIGKILLs: during a save (old or new content, no debris after the next save),
and of app instances holding unsaved work (every plan recovered, and still safe when
the recovering instance is killed at once)."""

from __future__ import annotations

from pathlib import Path

from tests.fuzz.run_processes import run_kills, run_recovery


def test_kill_during_save_keeps_the_old_or_the_new_file(tmp_path: Path) -> None:
    tally = run_kills(6, 21, tmp_path)
    assert tally.ok, tally.problems()


def test_two_crashed_instances_are_both_recovered_and_survive_a_second_crash(
    tmp_path: Path,
) -> None:
    tally = run_recovery(1, 21, tmp_path)
    assert tally.ok, tally.problems()
    assert tally.outcomes["recovered 2"] == 1
