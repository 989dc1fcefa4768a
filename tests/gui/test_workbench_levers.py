"""The Layouts tab's fit levers: listed with the engine's counts once the worker sends
them, Apply as one undoable edit of exactly the lever's changes, a lever the stack
cannot run shown with its reason and no Apply, Tab from one Apply to the next."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

import engine.analysis as an
from engine.layout.levers import fit_levers
from engine.plan import default_plan, with_values
from gui.views.lever_rows import PENDING, with_vs_without


def _levers_shown(qtbot: Any, window: Any) -> Any:
    table = window.workbench.layouts.levers
    qtbot.waitUntil(lambda: bool(table.rows), timeout=90_000)
    return table


def test_the_tab_lists_the_engines_levers_for_the_plan(qtbot: Any, window: Any) -> None:
    """The default plan at sequence 6,144 (DP 8; arithmetic minimum 4 — at the default
    4,096 it is 3, which full recompute cannot lower, since the fit test no longer counts
    the releasable allocator cache; procurement 4 GPUs, a partial node): recompute,
    offload, LoRA and QLoRA, each with the procurement count fit_levers() finds for the
    same plan against the plan's own 4 (gui/views/lever_rows.py with_vs_without: "4 (the
    same without it)" or "1 instead of 4"; no lever needs more), its layout and its
    arithmetic minimum (below the plan's own)."""
    window.doc.set("batch.seq_len", 6144)
    qtbot.waitUntil(lambda: not window.doc.pending)
    table = _levers_shown(qtbot, window)
    plan = window.doc.plan
    assert plan == with_values(default_plan(), {"batch.seq_len": 6144})
    base = an.analysis(plan).counts
    assert base.arithmetic_min.gpus == 4
    levers = fit_levers(plan)
    assert [r.lever.name for r in table.rows] == [lv.name for lv in levers]
    assert [lv.name for lv in levers][:3] == [
        "full activation recompute",
        "offload to host RAM",
        "LoRA",
    ]
    t = table.table
    for i, lv in enumerate(levers):
        was = base.first_layout.gpus
        assert lv.counts is not None and lv.gpus is not None and was == 4 and lv.gpus <= was
        gpus = t.item(i, 2).text()
        assert gpus.startswith(with_vs_without(lv.gpus, was))
        assert lv.counts.first_layout.layout.label() in gpus
        n, m = lv.counts.arithmetic_min.gpus, base.arithmetic_min.gpus
        assert n < m and t.item(i, 3).text() == f"{n} instead of {m}"
        assert t.item(i, 4).text() == lv.cost
    assert t.item(0, 1).text() == "Full activation recompute\nactivation recomputation: full"
    assert len(table.apply_buttons) == len(levers)
    assert all(b.focusPolicy() & Qt.FocusPolicy.TabFocus for b in table.apply_buttons)


def test_apply_sets_exactly_the_levers_changes_as_one_undo_step(qtbot: Any, window: Any) -> None:
    """Apply on the offload row sets offload.optimizer and offload.params to cpu — the
    plan is with_values(plan, changes), nothing else moved — in one undo step; Undo
    gives the default plan back, and the tab says it searches again meanwhile."""
    table = _levers_shown(qtbot, window)
    before = window.doc.plan
    row = next(i for i, r in enumerate(table.rows) if r.lever.name == "offload to host RAM")
    changes = dict(table.rows[row].lever.changes)
    assert changes == {"offload.optimizer": "cpu", "offload.params": "cpu"}
    steps = window.doc.undo_stack.count()
    qtbot.mouseClick(table.apply_buttons[row], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not window.doc.pending)
    assert window.doc.plan == with_values(before, changes)
    assert window.doc.undo_stack.count() == steps + 1
    assert window.doc.undo_stack.undoText() == "Apply fit lever: offload to host RAM"
    assert table.rows == () and table.status.text() == PENDING
    window.undo_action.trigger()
    qtbot.waitUntil(lambda: not window.doc.pending)
    assert window.doc.plan == before


def test_a_lever_the_stack_cannot_run_shows_why_without_apply(qtbot: Any, window: Any) -> None:
    """With the Megatron distributed optimizer the stack is Megatron-Core, which runs no
    peft LoRA: the LoRA and QLoRA rows say "cannot run: …" with that reason and have no
    Apply; recompute and offload keep theirs."""
    window.doc.set_many(
        {"parallelism.strategy": "megatron_distopt", "policy.max_gpus": 64}, "Megatron"
    )
    qtbot.waitUntil(lambda: not window.doc.pending)
    table = _levers_shown(qtbot, window)
    by_name = {r.lever.name: (i, r) for i, r in enumerate(table.rows)}
    for name in ("LoRA", "QLoRA"):
        i, r = by_name[name]
        assert not r.runnable and table.table.cellWidget(i, 0) is None
        text = table.table.item(i, 2).text()
        assert text.startswith("cannot run: method.kind") and "Megatron-Core" in text
    runnable = [r for r in table.rows if r.runnable]
    assert len(table.apply_buttons) == len(runnable) == 2


def test_tab_moves_from_one_apply_to_the_next(qtbot: Any, window: Any) -> None:
    """Keyboard: the table does not swallow Tab (no cell walking), so Tab goes from one
    lever's Apply to the next, and Space applies it."""
    table = _levers_shown(qtbot, window)
    layouts = window.results.indexOf(window.workbench.layouts)
    window.results.setCurrentIndex(layouts)
    first, second = table.apply_buttons[:2]
    first.setFocus(Qt.FocusReason.TabFocusReason)
    qtbot.waitUntil(first.hasFocus)
    qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Tab)
    assert second.hasFocus()
    steps = window.doc.undo_stack.count()
    qtbot.keyClick(second, Qt.Key.Key_Space)
    qtbot.waitUntil(lambda: not window.doc.pending)
    assert window.doc.undo_stack.count() == steps + 1
