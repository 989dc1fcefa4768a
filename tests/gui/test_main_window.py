"""The main window driven through its widgets: every tab updates estimate, chart, table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QMimeData, QPoint, Qt, QUrl
from PySide6.QtGui import QDropEvent
from PySide6.QtWidgets import QCheckBox, QComboBox, QLineEdit

from engine import planfile
from engine.plan import default_plan, with_value
from engine.units import GB
from gui import dialogs
from gui.views.chart_data import panels
from gui.views.table import COLUMNS

DEFAULT_STATES = 16_060_671_488


def editor(win: Any, path: str) -> Any:
    for page in win.tabs.values():
        if path in page.bindings:
            return page.bindings[path].editor
    raise KeyError(path)


def type_into(qtbot: Any, win: Any, path: str, text: str) -> None:
    edit = editor(win, path)
    assert isinstance(edit, QLineEdit)
    edit.setFocus()
    edit.selectAll()
    qtbot.keyClick(edit, Qt.Key.Key_Backspace)
    qtbot.keyClicks(edit, text)
    qtbot.keyClick(edit, Qt.Key.Key_Tab)
    qtbot.waitUntil(lambda: not win.doc.pending)


def choose(qtbot: Any, win: Any, path: str, value: str) -> None:
    combo = editor(win, path)
    assert isinstance(combo, QComboBox)
    index = combo.findData(value)
    assert index >= 0
    combo.setCurrentIndex(index)
    combo.activated.emit(index)
    qtbot.waitUntil(lambda: not win.doc.pending)


def painted(win: Any, key: str = "hbm") -> Any:
    """What the window's chart draws for panel ``key`` now (grab() paints it)."""
    win.chart.grab()
    return win.chart.painted[key]


def hbm_bar_tops(win: Any) -> list[float]:
    """Top of each HBM phase bar as drawn (its stacked segments and spread), in GB."""
    return [top / GB for top in painted(win).tops]


def expected_tops(win: Any) -> list[float]:
    """The HBM bar tops the chart data says (tested against the engine in
    test_fields_and_chart_data), in GB."""
    return [b.high / GB for b in panels(win.doc.plan, win.doc.estimate)[0].bars]


STATE_GROUPS = ("weights", "gradients", "optimizer")


def state_bytes(win: Any) -> int:
    """The persistent model-state rows (weights, gradients, optimizer) of the estimate."""
    return sum(
        r.high for r in win.doc.estimate.rows if r.kind == "persistent" and r.group in STATE_GROUPS
    )


def table_bytes(win: Any) -> dict[str, str]:
    model = win.table.ledger
    col = COLUMNS.index("Bytes")
    return {
        model.data(model.index(r, 0)): model.data(model.index(r, col))
        for r in range(model.rowCount())
    }


def test_default_plan_on_screen(qtbot: Any, window: Any) -> None:
    """The model states are 16,060,671,488 B (see test_document); the drawn bars are the
    chart data's, and the peak shown is the estimate's fit peak; the three GPU counts
    come from the layout search."""
    assert window.verdict.badge.text() == "FITS"
    assert state_bytes(window) == DEFAULT_STATES
    assert hbm_bar_tops(window) == pytest.approx(expected_tops(window))
    assert max(hbm_bar_tops(window)) == pytest.approx(window.doc.estimate.fit_peak.high / GB)
    # reserved stays visible: the releasable cache is outlined over each bar, up to the
    # reserved peak plus the memory outside PyTorch (test_fields_and_chart_data)
    bars = panels(window.doc.plan, window.doc.estimate)[0].bars
    assert painted(window).cached == tuple(b.reserved_high for b in bars)
    assert all(
        c > t * GB for c, t in zip(painted(window).cached, hbm_bar_tops(window), strict=True)
    )
    assert "allocator cache, released before OOM" in window.legend.text().replace("&nbsp;", " ")
    assert table_bytes(window)["Weights (fp32)"] == "4,015,130,624"
    peak_gb = f"{window.doc.estimate.fit_peak.high / GB:.2f} GB"
    assert peak_gb in window.verdict.values["peak"].text().replace("\u00a0", " ")
    # The layout search runs once edits settle, so typing stays cheap.
    qtbot.waitUntil(lambda: "arithmetic minimum" in window.verdict.counts.text())


def test_model_tab_layers(qtbot: Any, window: Any) -> None:
    """16 layers of 218,112,000 params + 1,050,677,248 embedding/head/norm = 4,540,469,248
    params; fp32 ÷ 8 ranks → 2,270,234,624 B of weights per rank."""
    type_into(qtbot, window, "model.architecture.layers", "16")
    assert window.doc.plan.model.architecture.layers == 16
    assert table_bytes(window)["Weights (fp32)"] == "2,270,234,624"
    assert hbm_bar_tops(window) == pytest.approx(expected_tops(window))
    assert state_bytes(window) < DEFAULT_STATES


def test_method_tab_optimizer(qtbot: Any, window: Any) -> None:
    """Plain SGD keeps no state: weights + grads = 2 × 4,015,130,624 = 8,030,261,248 B,
    and no optimizer row is left in the table or the legend."""
    choose(qtbot, window, "method.optimizer.name", "sgd")
    assert {"Weights (fp32)", "Gradients (fp32)"} <= set(table_bytes(window))
    assert not any(label.startswith("Optimizer") for label in table_bytes(window))
    assert state_bytes(window) == 8_030_261_248
    assert hbm_bar_tops(window) == pytest.approx(expected_tops(window))
    assert "optimizer" not in window.legend.text()


def test_parallelism_tab_dp_and_stages(qtbot: Any, window: Any) -> None:
    """DP 4 doubles each shard: 8,030,261,248 B of fp32 weights per rank."""
    type_into(qtbot, window, "parallelism.dp", "4")
    assert table_bytes(window)["Weights (fp32)"] == "8,030,261,248"
    assert "32 ranks" not in window.verdict.values["world"].text()
    assert window.verdict.values["world"].text().startswith("4")
    type_into(qtbot, window, "parallelism.pp", "2")
    chart = window.stages.chart
    assert window.stages.currentWidget() is chart and chart.panel is None  # tab not shown
    window.results.setCurrentWidget(window.stages)
    bars = chart.panel.bars
    assert len(bars) == 2 and sum(b.highlight for b in bars) == 1
    type_into(qtbot, window, "parallelism.pp", "4")  # on screen: drawn at once
    assert len(chart.panel.bars) == 4


def test_parallelism_tab_illegal_tp_keeps_last_estimate(qtbot: Any, window: Any) -> None:
    before = window.doc.estimate
    type_into(qtbot, window, "parallelism.tp", "3")
    assert window.doc.estimate is before
    edit = editor(window, "parallelism.tp")
    assert "must divide the 32 attention heads" in edit.property("error_message")
    assert "last valid estimate" in window.verdict.stale.text()
    assert hbm_bar_tops(window) == pytest.approx(expected_tops(window))
    assert state_bytes(window) == DEFAULT_STATES
    type_into(qtbot, window, "parallelism.tp", "2")
    assert edit.property("error_message") == ""
    assert window.verdict.stale.text() == ""


def test_invalid_field_shows_engine_message(qtbot: Any, window: Any) -> None:
    before = window.doc.plan
    type_into(qtbot, window, "batch.seq_len", "-1")
    edit = editor(window, "batch.seq_len")
    assert "must be at least 1" in edit.property("error_message")
    assert "must be at least 1" in edit.toolTip()
    assert window.doc.plan == before


def test_hardware_tab_accelerator_preset(qtbot: Any, window: Any) -> None:
    """H200: 140.4 GiB = 150,753,352,089 B, rounded down to 2 MiB = 150,751,674,368 B."""
    tab = window.tabs["hardware"]
    tab.accel.setCurrentIndex(tab.accel.findData("h200-sxm-141gb"))
    tab.apply_accelerator()
    qtbot.waitUntil(lambda: not window.doc.pending)
    assert window.doc.estimate.capacity_bytes == 150_751_674_368
    assert painted(window).capacities[0] == 150_751_674_368
    assert window.doc.undo_stack.count() == 1  # one preset, one undo step


def test_offload_tab(qtbot: Any, window: Any) -> None:
    """Under ZeRO-3, optimizer offload to the CPU moves the fp32 master and moments (and
    the fp32 gradient partition) off the GPU: the estimate follows the plan, the host
    panel shows the offloaded state, and the HBM model states shrink."""
    choose(qtbot, window, "parallelism.strategy", "zero3")
    before = state_bytes(window)
    assert editor(window, "offload.params").isEnabled()
    choose(qtbot, window, "offload.optimizer", "cpu")
    assert window.doc.estimate.config_hash == window.doc.plan.config_hash()
    assert state_bytes(window) < before
    host = panels(window.doc.plan, window.doc.estimate)[1]
    assert any(seg.group == "offload (pinned)" for seg in host.bars[1].segments)


def test_checkbox_edit_and_undo_redo_via_actions(qtbot: Any, window: Any) -> None:
    box = editor(window, "parallelism.sequence_parallel")
    type_into(qtbot, window, "parallelism.tp", "2")
    assert isinstance(box, QCheckBox) and box.isEnabled()
    box.click()
    assert window.doc.plan.parallelism.sequence_parallel
    window.undo_action.trigger()
    assert not window.doc.plan.parallelism.sequence_parallel and not box.isChecked()
    window.undo_action.trigger()
    assert window.doc.plan == default_plan()
    assert editor(window, "parallelism.tp").text() == "1"
    window.redo_action.trigger()
    assert window.doc.plan.parallelism.tp == 2


def test_units_switch_and_persist(qtbot: Any, window: Any) -> None:
    from gui.settings import Settings

    window.set_units("gib")
    assert window.table.isColumnHidden(COLUMNS.index("GB"))
    assert not window.table.isColumnHidden(COLUMNS.index("GiB"))
    assert painted(window).axis.unit == "GiB"
    assert Settings().units() == "gib"


def test_corrupt_file_shows_error_and_changes_nothing(
    window: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    errors: list[str] = []
    monkeypatch.setattr(dialogs, "show_error", lambda _p, _t, text: errors.append(text))
    bad = tmp_path / "broken.memplan"
    bad.write_text("not json at all", encoding="utf-8")
    before = window.doc.plan
    assert not window.files.open_file(str(bad), ask=False)
    assert errors and "not valid JSON" in errors[0]
    assert window.doc.plan is before and window.doc.path is None


def test_open_save_round_trip_through_window(
    qtbot: Any, window: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "mine.memplan"
    monkeypatch.setattr(dialogs, "save_path", lambda _p, _s: str(target))
    type_into(qtbot, window, "batch.seq_len", "8192")
    assert window.isWindowModified()
    assert window.files.save_plan()
    assert not window.isWindowModified() and "mine.memplan" in window.windowTitle()
    assert planfile.load(target).plan.config_hash() == window.doc.plan.config_hash()
    window.files.new_plan()
    assert window.doc.plan == default_plan()
    assert window.files.open_file(str(target))
    assert window.doc.plan.batch.seq_len == 8192
    assert str(target.resolve()) in window.settings.recent_files()


def test_drop_a_plan_file_opens_it(qtbot: Any, window: Any, tmp_path: Path) -> None:
    target = tmp_path / "dropped.memplan"
    planfile.save(planfile.PlanFile(plan=with_value(default_plan(), "parallelism.dp", 2)), target)
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(target))])
    event = QDropEvent(
        QPoint(10, 10),
        Qt.DropAction.CopyAction,
        mime,
        Qt.MouseButton.NoButton,
        Qt.KeyboardModifier.NoModifier,
    )
    window.dropEvent(event)
    assert window.doc.path == target and window.doc.plan.parallelism.dp == 2


@pytest.mark.parametrize(("answer", "closes"), [("cancel", False), ("discard", True)])
def test_closing_with_unsaved_changes_prompts(
    qtbot: Any, window: Any, monkeypatch: pytest.MonkeyPatch, answer: str, closes: bool
) -> None:
    asked: list[str] = []
    monkeypatch.setattr(dialogs, "ask_unsaved", lambda _p, name: asked.append(name) or answer)
    type_into(qtbot, window, "batch.seq_len", "2048")
    window.close()
    assert asked == ["Untitled plan"]
    assert window.isVisible() is not closes
    if closes:
        assert window.settings.blob("geometry")


def test_closing_a_clean_plan_does_not_prompt(window: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dialogs, "ask_unsaved", lambda *_a: pytest.fail("prompted"))
    window.close()
    assert not window.isVisible()


def test_recovery_offer_on_start(
    qtbot: Any, window: Any, monkeypatch: pytest.MonkeyPatch, dead_pid: int
) -> None:
    """A previous session's autosave (dead pid) is offered and loaded as unsaved changes."""
    import json

    from gui import app

    window.doc.set("batch.seq_len", 2048)
    assert window.autosaver.tick()
    saver = window.autosaver
    meta = json.loads(saver.meta_path.read_text(encoding="utf-8"))
    meta["pid"] = dead_pid  # as if written by a session that crashed
    crashed = saver.directory / "autosave-crashed"
    crashed.with_suffix(".json").write_text(json.dumps(meta), encoding="utf-8")
    crashed.with_suffix(".memplan").write_bytes(saver.plan_path.read_bytes())
    expected = window.doc.plan.config_hash()
    window.doc.new()
    monkeypatch.setattr(
        dialogs, "ask_recovery", lambda _w, os: {o.plan_path: "restore" for o in os}
    )
    assert app.offer_recovery(window)
    assert window.doc.plan.config_hash() == expected and window.doc.dirty
    assert not crashed.with_suffix(".memplan").exists()  # offered once, then removed


def test_an_edit_redraws_now_and_searches_layouts_after(qtbot: Any, window: Any) -> None:
    """The cheap views follow an edit at once; the GPU-count search waits until edits
    settle (SLOW_VIEWS_DELAY_MS), then fills the counts for the new plan."""
    qtbot.waitUntil(lambda: "arithmetic minimum" in window.verdict.counts.text())
    type_into(qtbot, window, "batch.seq_len", "8192")
    assert window.doc.estimate.config_hash == window.doc.plan.config_hash()
    assert window.verdict.counts.text() == "searching layouts…"
    qtbot.waitUntil(lambda: "arithmetic minimum" in window.verdict.counts.text())
