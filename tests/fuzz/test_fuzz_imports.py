"""Mutated import files of every kind (issue 33): refused in one sentence of at most 300
characters or imported as a plan that saves and reopens; no traceback, no case past the
10 s deadline. More cases: ``python tests/fuzz_imports_long.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fuzz.import_seeds import KINDS
from tests.fuzz.run_imports import run_imports

PER_KIND = 50
"""A CI sample: 300 files in all, a few seconds."""


@pytest.mark.parametrize("seed", [33])
def test_mutated_import_files_refuse_in_one_sentence_or_reopen(tmp_path: Path, seed: int) -> None:
    tally = run_imports(PER_KIND, seed, tmp_path)
    assert tally.cases == PER_KIND * len(KINDS)
    assert tally.ok and not tally.hangs, tally.problems()
    # the mutations reach both ends: files refused, and files imported, saved, reopened
    assert tally.outcomes["refused"] > 0 and tally.outcomes["imported"] > 0
