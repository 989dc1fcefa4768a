"""Mutated files through load → estimate → save → load (issue 21: 0 crashes, 0 lost
plans, no message over 300 characters). More cases: ``python tests/fuzz_long.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fuzz.run_files import run_files

FILES = 2000


@pytest.mark.parametrize("seed", [21, 2021])
def test_mutated_files_are_refused_in_one_sentence_or_round_trip(tmp_path: Path, seed: int) -> None:
    tally = run_files(FILES // 2, seed, tmp_path)
    assert tally.ok, tally.problems()
    # the mutations reach every stage: refusal at parse, at validation, and the estimate
    assert tally.outcomes["refused"] > 0 and tally.outcomes["estimated"] > 0
