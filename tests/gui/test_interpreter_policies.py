"""The window's interpreter policies (gui/workers/gc_policy.py, gil_policy.py) are in
force once it exists, and a new model's caches are frozen after its first estimate.

Each test puts CPython's defaults back first, so it fails if the window stops installing
the policy, whatever an earlier test's window did; tests/bench_gui.py prints what each
policy keeps away (these tests never time).
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from gui.workers.gc_policy import GEN2_THRESHOLD
from gui.workers.gil_policy import SWITCH_INTERVAL_S

CPYTHON_SWITCH_INTERVAL_S = 0.005
CPYTHON_THRESHOLDS = (700, 10, 10)


@pytest.fixture
def defaults() -> Iterator[None]:
    """CPython's defaults for the test, the process's own settings back after it."""
    interval, thresholds = sys.getswitchinterval(), gc.get_threshold()
    sys.setswitchinterval(CPYTHON_SWITCH_INTERVAL_S)
    gc.set_threshold(*CPYTHON_THRESHOLDS)
    gc.unfreeze()
    yield
    sys.setswitchinterval(interval)
    gc.set_threshold(*thresholds)


@pytest.fixture
def fresh_window(qtbot: Any, defaults: None) -> Iterator[Any]:
    from gui.main_window import MainWindow
    from gui.settings import Settings

    win = MainWindow(Settings(), autosave_ms=3_600_000)
    yield win
    win.doc.undo_stack.setClean()  # close without the unsaved-changes prompt
    win.close()
    win.deleteLater()


def test_the_window_shortens_the_gil_switch_interval(fresh_window: Any) -> None:
    assert SWITCH_INTERVAL_S < CPYTHON_SWITCH_INTERVAL_S
    assert sys.getswitchinterval() == SWITCH_INTERVAL_S


def test_the_window_freezes_its_heap_and_delays_full_collections(fresh_window: Any) -> None:
    young, middle, oldest = gc.get_threshold()
    assert (young, middle) == CPYTHON_THRESHOLDS[:2]  # the young generations keep theirs
    assert oldest == GEN2_THRESHOLD > CPYTHON_THRESHOLDS[2]
    assert gc.get_freeze_count() > 0


def test_a_new_models_first_estimate_is_frozen(qtbot: Any, fresh_window: Any) -> None:
    """What a model's estimate built and keeps (its caches) is frozen after it; the next
    estimate of the same model freezes nothing more."""
    doc = fresh_window.doc
    tab = fresh_window.tabs["model"]
    tab.preset.setCurrentIndex(tab.preset.findData("deepseek-v3"))
    tab.apply_preset()
    gc.unfreeze()  # what the window froze before is not this model's
    qtbot.waitUntil(lambda: not doc.pending and doc.plan.model.preset == "deepseek-v3")
    frozen = gc.get_freeze_count()
    assert frozen > 0
    doc.set("batch.seq_len", 2 * doc.plan.batch.seq_len)
    doc.flush()
    # nothing more is frozen; a frozen object the edit let go (a plan's memo entry the
    # ledger replaced) leaves the permanent generation, so the count may fall
    assert gc.get_freeze_count() <= frozen
