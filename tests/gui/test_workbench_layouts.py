"""The Layouts tab: counts, the chosen layout (the plan's own when it fits), Apply as one
undoable edit, and only the rejections that apply to this model."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt

import engine.analysis as an
from engine.estimate import estimate
from engine.layout.shapes import Layout, layout_of
from engine.plan import default_plan, with_value, with_values
from gui.views.layout_choice import choose, layout_changes, relevant_rejections


def _counts_shown(qtbot: Any, window: Any) -> Any:
    view = window.workbench.layouts
    qtbot.waitUntil(lambda: view.choice is not None, timeout=60_000)
    return view


def test_the_plans_own_layout_is_chosen_when_it_fits(qtbot: Any, window: Any) -> None:
    """The default plan (DP 8 on one node of 8) fits: it is the chosen layout, on 8 GPUs;
    the counts' procurement layout is TP2 DP2 on a partial node of 4 GPUs
    (engine/layout/point.py), which the note offers as the way to buy less."""
    view = _counts_shown(qtbot, window)
    choice = view.choice
    plan = window.doc.plan
    counts = an.analysis(plan).counts
    assert choice.chosen.role == "plan" and choice.chosen.layout == layout_of(plan)
    assert counts.chosen.layout == layout_of(plan) and counts.first_layout.gpus == 4
    assert [r.role for r in choice.rows][:2] == ["plan", "first"]
    assert choice.chosen.gpus == 8
    assert "TP1 PP1 CP1 EP1 DP8" in view.note.text()
    assert "the fewest that fit are 4 (TP1 PP1 CP1 EP1 DP4" in view.note.text()
    assert view.table.rowCount() == len(choice.rows)
    assert view.apply_buttons[0].text() == "Current" and not view.apply_buttons[0].isEnabled()
    assert view.topology.topo is not None and view.topology.topo.layout == layout_of(plan)


def test_apply_sets_the_layout_as_one_undoable_edit(qtbot: Any, window: Any) -> None:
    """Apply on the first alternative sets its layout in one undo step; Undo brings DP 8
    back, and the tab follows the plan on screen."""
    view = _counts_shown(qtbot, window)
    row = next(i for i, r in enumerate(view.choice.rows) if r.role == "alternative")
    target = view.choice.rows[row].layout
    steps = window.doc.undo_stack.count()
    qtbot.mouseClick(view.apply_buttons[row], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not window.doc.pending)
    assert layout_of(window.doc.plan) == target
    assert window.doc.undo_stack.count() == steps + 1
    assert window.doc.undo_stack.undoText().startswith(f"Apply layout {target.label()[:12]}")
    qtbot.waitUntil(lambda: view.choice is not None and view.choice.chosen.layout == target)
    window.undo_action.trigger()
    qtbot.waitUntil(lambda: not window.doc.pending)
    assert window.doc.plan.parallelism.dp == 8
    qtbot.waitUntil(lambda: view.choice is not None and view.choice.chosen.layout.dp == 8)


def test_when_the_plan_does_not_fit_the_first_legal_layout_is_chosen() -> None:
    """Sequence 16,384 on DP 8 does not fit 80 GB: the chosen layout is the search's first
    legal one, listed first, and the plan's own row is still offered (as Current)."""
    plan = with_values(default_plan(), {"batch.seq_len": 16384, "policy.max_gpus": 64})
    est = estimate(plan)
    assert est.verdict != "fits"
    counts = an.analysis(plan).counts
    choice = choose(plan, est, counts)
    assert choice.chosen is not None and choice.chosen.role == "first"
    assert choice.rows[0] is choice.chosen
    assert any(r.role == "plan" for r in choice.rows)
    assert "does not fit" in choice.note


def test_rejections_that_cannot_apply_to_a_dense_model_are_hidden() -> None:
    """A dense model never runs EP > 1: the engine's lattice has none to reject (EP folds
    over TP × CP × DP, and a dense model has EP 1 only), and the view would hide any such
    rejection; every other rejection stays (here: TP 3 on 32 heads, which does not
    divide)."""
    plan = default_plan()
    counts = an.analysis(plan).counts
    kept = relevant_rejections(plan, counts.rejected)
    assert kept == counts.rejected and all(r.layout.ep == 1 for r in kept)
    from engine.layout.shapes import Rejected

    tp3 = Rejected(Layout(3, 1, 1, 1, 1), ("TP 3 does not divide the 32 attention heads",))
    ep2 = Rejected(Layout(1, 1, 1, 2, 4), ("EP 2 needs a mixture-of-experts model",))
    assert relevant_rejections(plan, (tp3, ep2)) == (tp3,)


def test_layout_changes_name_only_the_fields_that_move() -> None:
    """From DP 8 to DP 4 with the micro-batch held: only parallelism.dp changes; to TP 2
    DP 4: parallelism.tp and parallelism.dp."""
    plan = default_plan()
    assert layout_changes(plan, Layout(1, 1, 1, 1, 4)) == {"parallelism.dp": 4}
    assert layout_changes(plan, Layout(2, 1, 1, 1, 4)) == {"parallelism.tp": 2, "parallelism.dp": 4}
    assert layout_changes(plan, layout_of(plan)) == {}
    held = with_values(plan, {"batch.hold_fixed": "global_batch", "batch.global_batch": 16})
    got = layout_changes(held, Layout(1, 1, 1, 1, 4, 1, 4))
    assert got == {"parallelism.dp": 4, "batch.grad_accum": 4}


def test_counts_unavailable_are_said(qtbot: Any, window: Any) -> None:
    from engine.errors import PlanError

    view = window.workbench.layouts
    view.show_counts(PlanError("no layout"), "gb")
    assert "unavailable" in view.counts.text() and view.table.rowCount() == 0
    view.show_counts(None, "gb")
    assert view.counts.text().startswith("Searching")


def test_plan_edit_shows_pending_until_the_new_counts_arrive(qtbot: Any, window: Any) -> None:
    view = _counts_shown(qtbot, window)
    window.doc.set("batch.seq_len", 2048)
    window.doc.flush()
    assert view.choice is None and view.counts.text().startswith("Searching")
    qtbot.waitUntil(lambda: view.choice is not None, timeout=60_000)
    assert view.choice.chosen.high == window.doc.estimate.fit_peak.high
    assert with_value(default_plan(), "batch.seq_len", 2048) == window.doc.plan
