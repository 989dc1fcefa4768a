"""Random edits through the window's widgets, then undo all and redo all: the same
config hashes, step by step, back to the start and forward to the end."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fuzz.run_gui import run_gui_edits


@pytest.mark.parametrize("seed", [21, 22])
def test_random_gui_edits_undo_and_redo_to_the_same_hashes(
    qtbot: Any, window: Any, seed: int
) -> None:
    tally = run_gui_edits(window, 100, seed)
    assert tally.ok, tally.problems()
    assert tally.outcomes["undo steps"] > 0
