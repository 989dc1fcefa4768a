"""A large model's first estimate comes off the GUI thread, and the window stays consistent.

Applying a MoE preset not estimated here before changes the plan at once (one undo
step) and estimates it on a pool thread (gui/workers/cold_estimate.py); meanwhile the last
plan's figures stay on screen, greyed, with no counts offered as the new plan's. These
tests hold the thread's estimate back with an event (never a timing) to see that state,
a second apply superseding the first, and undo.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import gui.workers.cold_estimate as cold_module
from engine.estimate import Estimate
from engine.models.presets import load_preset
from engine.models.spec import ArchitectureSpec
from engine.plan import Plan
from gui.views.verdict import COUNTS_UPDATING, VERDICT_WORDS
from gui.workers.cold_estimate import heavy

FIRST, SECOND = "deepseek-v2-lite", "qwen1.5-moe-a2.7b"
"""Two MoE presets above the heavy threshold with small inventories (tens of ms)."""


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], threading.Event]]:
    """``held(preset)`` → an event: the pool thread's estimate of that preset's plans
    waits until it is set (the GUI thread's own estimates never wait)."""
    gates: dict[ArchitectureSpec, threading.Event] = {}
    real = cold_module.estimate

    def slow(plan: Plan) -> Estimate:
        gate = gates.get(plan.model.architecture)
        if gate is not None:
            gate.wait(30)
        return real(plan)

    def hold(preset: str) -> threading.Event:
        gate = threading.Event()
        gates[load_preset(preset)[1]] = gate
        return gate

    monkeypatch.setattr(cold_module, "estimate", slow)
    yield hold
    for gate in gates.values():  # never leave the pool thread waiting
        gate.set()


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
        and not doc.computing
        and est is not None
        and est.config_hash == doc.plan.config_hash()
        and window.verdict.badge.text() == VERDICT_WORDS[est.verdict]
        and window.verdict.stale.text() == ""
    )


def test_the_presets_used_here_are_heavy() -> None:
    """Otherwise the tests below would estimate them on the GUI thread and prove nothing."""
    assert heavy(load_preset(FIRST)[1]) and heavy(load_preset(SECOND)[1])
    assert not heavy(load_preset("llama-3.1-405b")[1])  # dense: estimated at once


def test_apply_shows_computing_then_the_new_plan(qtbot: Any, window: Any, held: Any) -> None:
    gate = held(FIRST)
    before = window.doc.estimate
    _apply(window, FIRST)
    assert window.doc.plan.model.preset == FIRST  # the plan (and its fields) at once
    qtbot.waitUntil(lambda: window.doc.computing)
    assert window.doc.stale
    assert window.doc.estimate is before  # the last plan's figures stay...
    assert "computing" in window.verdict.stale.text()  # ...greyed, saying why
    assert window.verdict.counts.text() == COUNTS_UPDATING  # no counts of the old plan
    window.set_units("gib")  # a redraw meanwhile keeps the badge grey
    assert "computing" in window.verdict.stale.text()
    gate.set()
    qtbot.waitUntil(lambda: _consistent(window), timeout=30_000)
    assert window.doc.estimate is not before


def test_a_second_apply_supersedes_the_first(qtbot: Any, window: Any, held: Any) -> None:
    shown: list[str] = []
    window.doc.estimateChanged.connect(lambda: shown.append(window.doc.estimate.config_hash))
    gate = held(FIRST)
    _apply(window, FIRST)
    qtbot.waitUntil(lambda: window.doc.computing)
    _apply(window, SECOND)  # the first model's inventory is still being built
    qtbot.waitUntil(lambda: window.doc.plan.model.preset == SECOND and window.doc.computing)
    gate.set()
    qtbot.waitUntil(lambda: _consistent(window), timeout=30_000)
    qtbot.wait(50)  # anything still queued for the first model would arrive now
    assert window.doc.plan.model.preset == SECOND
    assert _consistent(window)
    assert shown == [window.doc.plan.config_hash()]  # the first plan was never shown


def test_undo_while_computing_returns_to_the_old_plan(qtbot: Any, window: Any, held: Any) -> None:
    start = window.doc.estimate.config_hash
    gate = held(FIRST)
    _apply(window, FIRST)
    qtbot.waitUntil(lambda: window.doc.computing)
    window.doc.undo()
    qtbot.waitUntil(lambda: _consistent(window))
    gate.set()  # the abandoned build finishes: its plan is not the document's any more
    qtbot.wait(50)
    assert window.doc.plan.model.preset == "llama-3.1-8b"
    assert window.doc.estimate.config_hash == start
    assert _consistent(window)


def test_undo_and_redo_of_a_finished_apply(qtbot: Any, window: Any) -> None:
    start = window.doc.estimate.config_hash
    _apply(window, FIRST)
    qtbot.waitUntil(lambda: _consistent(window), timeout=30_000)
    applied = window.doc.estimate.config_hash
    assert window.doc.undo_stack.count() == 1
    window.doc.undo()
    qtbot.waitUntil(lambda: _consistent(window))
    assert window.doc.estimate.config_hash == start
    window.doc.redo()  # built once: estimated at once, no computing state
    qtbot.waitUntil(lambda: _consistent(window))
    assert window.doc.estimate.config_hash == applied


def test_flush_estimates_a_large_model_at_once(qtbot: Any, window: Any, held: Any) -> None:
    """What a save or a report does first: the plan's own figures, whatever the model,
    without waiting for the build held on the pool thread."""
    held(SECOND)
    _apply(window, SECOND)
    qtbot.waitUntil(lambda: window.doc.computing)
    window.doc.flush()
    assert not window.doc.computing
    assert window.doc.estimate.config_hash == window.doc.plan.config_hash()
