"""The input tabs other than the visible one are built on first show or first lookup:
the window starts with the Model page only, and every page is there, bound to the plan,
for whoever asks — the tab bar, the mapping, a field to go to, a units switch."""

from __future__ import annotations

from typing import Any

from gui.tabs.lazy import TabSlot
from gui.tabs.method import MethodTab
from gui.tabs.offload import OffloadTab


def test_only_the_visible_page_is_built_at_start(window: Any) -> None:
    assert [type(p).__name__ for p in window.tabs.built()] == ["ModelTab"]
    assert list(window.tabs) == ["model", "method", "parallelism", "hardware", "offload"]
    assert all(isinstance(window.inputs.widget(i), TabSlot) for i in range(5))


def test_showing_a_tab_builds_its_page_into_the_slot(qtbot: Any, window: Any) -> None:
    window.inputs.setCurrentIndex(window.tabs.index_of("method"))
    page = window.tabs.built()[-1]
    assert isinstance(page, MethodTab) and page.isVisible()
    assert page.parent() is window.inputs.currentWidget()
    assert page.bindings["batch.seq_len"].editor.text() == "4096"
    assert window.tabs["method"] is page  # built once


def test_a_lookup_builds_the_page_with_the_plan_and_units_of_now(qtbot: Any, window: Any) -> None:
    """Units switched to GiB and the plan edited before the Offload page exists: the
    page, built by the lookup, shows both."""
    window.set_units("gib")
    window.doc.set("offload.optimizer", "cpu", merge=False)
    qtbot.waitUntil(lambda: not window.doc.pending)
    page = window.tabs["offload"]
    assert isinstance(page, OffloadTab)
    assert page.units == "gib"
    assert page.bindings["offload.optimizer"].editor.currentData() == "cpu"


def test_a_page_built_after_the_plan_failed_marks_its_fields(qtbot: Any, window: Any) -> None:
    """TP 3 does not divide Llama-3.1-8B's 32 heads: the Parallelism page, built after
    the estimate failed, marks TP with the rule's sentence at once."""
    window.doc.set("parallelism.tp", 3, merge=False)
    qtbot.waitUntil(lambda: not window.doc.pending)
    assert window.doc.estimate_problems
    binding = window.tabs["parallelism"].bindings["parallelism.tp"]
    assert "must divide the 32 attention heads" in (binding.error or "")


def test_go_to_field_builds_and_shows_the_page_holding_it(qtbot: Any, window: Any) -> None:
    window.go_to_field("checkpoint.retention")
    assert window.inputs.currentIndex() == window.tabs.index_of("offload")
    binding = window.tabs["offload"].bindings["checkpoint.retention"]
    qtbot.waitUntil(binding.editor.hasFocus)


def test_the_analysis_worker_starts_once_the_window_is_shown(
    qtbot: Any, isolated_dirs: Any
) -> None:
    """Built but not shown, the window has not started its worker process (its start
    would compete with the window's own); shown, it searches and the counts arrive."""
    from PySide6.QtCore import QProcess

    from gui.main_window import MainWindow
    from gui.settings import Settings
    from gui.workers.analysis_parts import SLOW_VIEWS_DELAY_MS

    win = MainWindow(Settings(), autosave_ms=3_600_000)
    qtbot.wait(3 * SLOW_VIEWS_DELAY_MS)
    assert not win.worker.busy and not win.findChildren(QProcess)
    win.show()
    qtbot.waitUntil(lambda: "arithmetic minimum" in win.verdict.counts.text(), timeout=30_000)
    win.doc.undo_stack.setClean()
    win.close()
    win.deleteLater()
