"""A large model's first estimate runs where every estimate runs: in the document's turn.

There is no "computing" state any more (gui/document.py): applying a MoE preset not
estimated in this process before changes the plan and, in the same event-loop turn that
settles the edits, shows that plan's own estimate; the stale marker only ever means a
plan the engine refuses. These tests hold the window to that, with presets whose
tensor inventories are the largest of the catalogue (engine/models/presets).
"""

from __future__ import annotations

from typing import Any

import pytest

from gui.views.verdict import VERDICT_WORDS

FIRST, SECOND = "deepseek-v3", "llama-4-maverick"
"""The presets whose first estimate builds the most (tensor inventories and per-model memos):
the two largest MoE models, slowest in tests/bench_gui.py."""


def _apply(window: Any, preset: str) -> None:
    tab = window.tabs["model"]
    tab.preset.setCurrentIndex(tab.preset.findData(preset))
    tab.apply_preset()


def _consistent(window: Any) -> bool:
    """The estimate on screen is the plan's own, and the verdict says so."""
    doc = window.doc
    est = doc.estimate
    return (
        not doc.pending
        and not doc.stale
        and est is not None
        and est.config_hash == doc.plan.config_hash()
        and window.verdict.badge.text() == VERDICT_WORDS[est.verdict]
        and window.verdict.stale.text() == ""
    )


@pytest.mark.parametrize("preset", [FIRST, SECOND])
def test_apply_shows_the_new_plan_after_one_turn(qtbot: Any, window: Any, preset: str) -> None:
    """The edits are pending until the 0 ms timer fires; then the plan's own estimate is
    shown, with nothing in between (no stale state while a model is prepared)."""
    shown: list[str] = []
    window.doc.estimateChanged.connect(lambda: shown.append(window.doc.estimate.config_hash))
    _apply(window, preset)
    assert window.doc.plan.model.preset == preset  # the plan (and its fields) at once
    assert window.doc.pending and not window.doc.stale
    qtbot.waitUntil(lambda: not window.doc.pending)
    assert _consistent(window)
    assert shown == [window.doc.plan.config_hash()]  # one estimate, the new plan's


def test_a_second_apply_in_the_same_turn_costs_one_estimate(qtbot: Any, window: Any) -> None:
    shown: list[str] = []
    window.doc.estimateChanged.connect(lambda: shown.append(window.doc.estimate.config_hash))
    _apply(window, FIRST)
    _apply(window, SECOND)  # before the turn settles: the first is never estimated
    qtbot.waitUntil(lambda: not window.doc.pending)
    assert window.doc.plan.model.preset == SECOND
    assert _consistent(window)
    assert shown == [window.doc.plan.config_hash()]


def test_undo_and_redo_of_an_apply(qtbot: Any, window: Any) -> None:
    start = window.doc.estimate.config_hash
    _apply(window, FIRST)
    qtbot.waitUntil(lambda: _consistent(window))
    applied = window.doc.estimate.config_hash
    assert applied != start
    assert window.doc.undo_stack.count() == 1
    window.doc.undo()
    qtbot.waitUntil(lambda: _consistent(window))
    assert window.doc.plan.model.preset == "llama-3.1-8b"
    assert window.doc.estimate.config_hash == start
    window.doc.redo()
    qtbot.waitUntil(lambda: _consistent(window))
    assert window.doc.estimate.config_hash == applied


def test_flush_estimates_a_large_model_at_once(window: Any) -> None:
    """What a save or a report does first: the plan's own figures, without an event-loop
    turn."""
    _apply(window, SECOND)
    assert window.doc.pending
    window.doc.flush()
    assert not window.doc.pending
    assert window.doc.estimate.config_hash == window.doc.plan.config_hash()
