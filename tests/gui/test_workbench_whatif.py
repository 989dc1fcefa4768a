"""The Sweep tab (on a worker, progress, Cancel), the Compare window, Help and About, and
what the report includes from them."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

import gui.sweep.sweep_panel as sp
from engine import FORMULA_VERSION
from engine.estimate import estimate
from engine.plan import with_value
from engine.whatif.compare import Comparison
from engine.whatif.sweep import Sweep


def _sweep(qtbot: Any, window: Any, path: str, values: str) -> Sweep:
    panel = window.workbench.sweep
    window.results.setCurrentWidget(panel)
    index = next(i for i in range(panel.field.count()) if panel.field.itemData(i)[0] == path)
    panel.field.setCurrentIndex(index)
    panel.values.setText(values)
    qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: panel.result is not None and not panel.runner.busy, timeout=60_000)
    return panel.result


def test_sweep_runs_off_the_gui_thread_and_charts_the_result(
    qtbot: Any, window: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sequence 1,024 … 16,384: the default plan fits up to 4,096 (the CLI sweep's
    boundary); the table has a row per value with the estimate's peak, computed on
    another thread."""
    threads: list[int] = []
    real = sp.sweep

    def recording(*args: Any, **kwargs: Any) -> Sweep:
        threads.append(threading.get_ident())
        return real(*args, **kwargs)

    monkeypatch.setattr(sp, "sweep", recording)
    s = _sweep(qtbot, window, "batch.seq_len", "1024:16384:x2")
    assert threads and threads[0] != threading.get_ident()
    panel = window.workbench.sweep
    assert [p.value for p in s.points] == [1024, 2048, 4096, 8192, 16384]
    assert s.boundary is not None and s.boundary.value == 4096
    assert panel.table.rowCount() == 5 and "◀" in panel.table.item(2, 0).text()
    e = estimate(with_value(window.doc.plan, "batch.seq_len", 8192))
    assert s.points[3].high == e.fit_peak.high
    assert panel.chart.sweep is s and panel.progress.isHidden()
    assert "largest batch.seq_len that fits: 4,096" in panel.status.text()
    image = panel.chart.grab().toImage()  # it paints
    assert image.width() > 0


def test_sweep_cancel_keeps_the_points_so_far(
    qtbot: Any, window: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep's estimates are held after the first value; Cancel then stops it: the
    result keeps what was computed and says it was cancelled."""
    gate, started = threading.Event(), threading.Event()
    real = sp.sweep

    def held(plan: Any, spec: Any, progress: Any = None) -> Sweep:
        def est(p: Any) -> Any:
            if started.is_set():
                gate.wait(30)
            started.set()
            return estimate(p, decisive_only=True)

        return real(plan, spec, estimator=est, progress=progress)

    monkeypatch.setattr(sp, "sweep", held)
    panel = window.workbench.sweep
    panel.values.setText("1024:65536:x2")
    assert panel.run()
    qtbot.waitUntil(started.is_set)
    assert panel.cancel_button.isEnabled() and not panel.progress.isHidden()
    qtbot.mouseClick(panel.cancel_button, Qt.MouseButton.LeftButton)
    gate.set()
    qtbot.waitUntil(lambda: panel.result is not None, timeout=30_000)
    assert panel.result.cancelled and len(panel.result.points) < 7
    assert "Cancelled after" in panel.status.text()
    assert not panel.cancel_button.isEnabled()


def test_a_bad_range_is_said_at_the_panel(qtbot: Any, window: Any) -> None:
    panel = window.workbench.sweep
    panel.values.setText("1024:8")
    assert not panel.run()
    assert "Cannot sweep" in panel.status.text() and not panel.runner.busy
    panel.field.setEditText("batch.nope")
    panel.values.setText("1,2")
    assert not panel.run() and "unknown field" in panel.status.text()


def test_sweep_for_the_report_only_while_it_is_of_the_plan_on_screen(
    qtbot: Any, window: Any
) -> None:
    _sweep(qtbot, window, "batch.micro_batch", "1,2")
    panel = window.workbench.sweep
    assert window.workbench.report_extras() == {}  # not asked for
    panel.include.setChecked(True)
    assert window.workbench.report_extras()["sweep"] is panel.result
    window.doc.set("batch.seq_len", 2048)
    window.doc.flush()
    assert window.workbench.report_extras() == {}
    assert not panel.include.isEnabled() and "earlier version" in panel.status.text()


def _compared(qtbot: Any, cw: Any) -> Comparison:
    qtbot.waitUntil(lambda: cw.result is not None and not cw.runner.busy, timeout=60_000)
    return cw.result


def test_compare_with_the_saved_version(qtbot: Any, window: Any, tmp_path: Path) -> None:
    """Saved at sequence 4,096, edited to 12,288: the saved version is the baseline, the
    inputs tab lists batch.seq_len, the rows tab the rows that grew, and the summary the
    two verdicts (FITS, DOES NOT FIT: the fit peak's low end at 12,288 is 116.8 GB, over
    the 84.9 GB limit; at 8,192 it is 82.9–91.1 GB, which straddles it)."""
    path = tmp_path / "plan.memplan"
    window.doc.save(path)
    assert window.workbench.compare.with_saved.isEnabled()
    window.doc.set("batch.seq_len", 12288)
    cw = window.workbench.compare.compare_with_saved()
    qtbot.addWidget(cw)
    c = _compared(qtbot, cw)
    assert [s.name for s in c.sides] == ["plan.memplan (saved)", "plan.memplan (on screen)"]
    assert [d.path for d in c.inputs] == ["batch.seq_len"]
    assert cw.inputs.rowCount() == 1 and cw.inputs.item(0, 0).text() == "batch.seq_len"
    assert cw.rows.rowCount() == len(c.changed_rows) > 0
    assert cw.summary.item(0, 0).text() == "FITS" and cw.summary.item(0, 1).text() == "DOES NOT FIT"
    assert cw.chart.comparison is c
    assert c.sides[0].counts is not None and c.sides[1].counts is not None
    cw.include.setChecked(True)
    assert window.workbench.report_extras()["comparison"] is c


def test_compare_with_files_and_add_remove(qtbot: Any, window: Any, tmp_path: Path) -> None:
    from engine.planfile import PlanFile, save

    other = tmp_path / "lora.memplan"
    save(PlanFile(plan=with_value(window.doc.plan, "method.kind", "lora")), other)
    cw = window.workbench.compare.compare_with_files([str(other)])
    qtbot.addWidget(cw)
    c = _compared(qtbot, cw)
    assert len(c.sides) == 2 and c.sides[1].name == "lora.memplan"
    free = window.screen().availableGeometry()
    assert cw.width() <= free.width() and cw.height() <= free.height()  # opens on screen
    assert not cw.remove_button.isEnabled()
    cw.add_plan("seq 2048", with_value(window.doc.plan, "batch.seq_len", 2048))
    c = _compared(qtbot, cw)
    assert len(c.sides) == 3 and cw.remove_button.isEnabled()
    cw.remove_last()
    assert len(_compared(qtbot, cw).sides) == 2


def test_help_guide_and_about_open(qtbot: Any, window: Any) -> None:
    guide = window.workbench.help.show_guide()
    qtbot.waitExposed(guide)
    text = guide.text.toPlainText()
    for words in ("Validation range", "Arithmetic minimum", "Hatching", "activations", "limit"):
        assert words in text
    about = window.workbench.help.show_about()
    qtbot.waitExposed(about)
    about_text = about.text.toPlainText()
    assert f"Formula version\n{FORMULA_VERSION} " in about_text
    assert "Plan file schema" in about_text
    assert window.workbench.help.guide.shortcut().toString() == "F1"
    guide.close()
    about.close()


def test_compare_shows_estimates_first_and_cancel_keeps_them(
    qtbot: Any, window: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first pass (estimates only) is on screen before the layout searches; cancelling
    the searches keeps it."""
    import engine.analysis as an

    gate = threading.Event()
    real = an.gpu_counts

    def held(plan: Any, **_: Any) -> Any:
        gate.wait(30)
        return real(plan)

    an.forget_analyses()
    monkeypatch.setattr(an, "gpu_counts", held)
    cw = window.workbench.compare.open(
        [("a", window.doc.plan), ("b", with_value(window.doc.plan, "batch.seq_len", 1024))]
    )
    qtbot.addWidget(cw)
    qtbot.waitUntil(lambda: cw.result is not None, timeout=30_000)
    first = cw.result
    assert all(s.counts is None and s.estimate is not None for s in first.sides)
    assert cw.summary.item(0, 1).text() == "FITS"
    qtbot.mouseClick(cw.cancel_button, Qt.MouseButton.LeftButton)
    gate.set()
    qtbot.waitUntil(lambda: not cw.runner.busy, timeout=30_000)
    assert cw.result is first and "cancelled" in cw.status.text()
    an.forget_analyses()


def test_the_compare_window_closes_on_escape_and_ctrl_w(
    qtbot: Any, window: Any, tmp_path: Path
) -> None:
    """It ignored both; each now closes it, as the window's dialogs do."""
    from PySide6.QtCore import Qt

    from engine.planfile import PlanFile, save

    other = tmp_path / "lora.memplan"
    save(PlanFile(plan=with_value(window.doc.plan, "method.kind", "lora")), other)
    for key, mod in (
        (Qt.Key.Key_Escape, Qt.KeyboardModifier.NoModifier),
        (Qt.Key.Key_W, Qt.KeyboardModifier.ControlModifier),
    ):
        cw = window.workbench.compare.compare_with_files([str(other)])
        qtbot.addWidget(cw)
        cw.show()
        qtbot.waitExposed(cw)
        qtbot.keyClick(cw, key, mod)
        qtbot.waitUntil(lambda cw=cw: not cw.isVisible(), timeout=5_000)
