"""The chart updates its items in place, scales node panels to their bars, names every
capacity, colours every group apart; the Per step tab; the preset chooser follows the
plan; the report is written off the GUI thread and a cancelled one leaves no file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.ledger.states.moved import GROUP_PAGEABLE, GROUP_PINNED
from engine.units import GB
from gui.views.chart_data import GROUP_ORDER, Bar, Panel, Segment
from gui.views.chart_scale import bar_label, capacity_note, panel_scale
from gui.views.colors import GROUP_COLORS, RESERVE, group_color
from tests.gui.test_model_tab import SMOL_CONFIG


def test_an_edit_repaints_the_chart_with_the_new_estimate(qtbot: Any, window: Any) -> None:
    """The chart is painted, not built of items: an edit hands it the new panels, and
    its next paint draws the new peak (the tallest HBM bar is the fit peak's high end)
    without a child widget being made."""
    children = len(window.chart.children())
    window.doc.set("batch.seq_len", 8192, merge=False)
    qtbot.waitUntil(lambda: not window.doc.pending)
    window.chart.grab()
    assert max(window.chart.painted["hbm"].tops) == window.doc.estimate.fit_peak.high
    assert len(window.chart.children()) == children


def test_every_group_has_its_own_colour() -> None:
    groups = {*GROUP_ORDER, "buffers", GROUP_PINNED, GROUP_PAGEABLE}
    colors = [group_color(g).name().lower() for g in groups]
    assert len(set(colors)) == len(colors)
    assert not {c.lower() for c in RESERVE} & {c.lower() for c in GROUP_COLORS.values()}


def _node_panel() -> Panel:
    seg = (Segment("processes", 59 * GB, 199 * GB),)
    return Panel(
        "host",
        "Host RAM",
        (
            Bar("Rank share", (Segment("processes", 7 * GB, 25 * GB),), 275 * GB),
            Bar("Node", seg, capacity=2_199 * GB),
        ),
    )


def test_node_panel_scales_to_its_bars_and_names_the_capacity_off_the_axis() -> None:
    """Tallest bar 199 GB: the 275 GB rank-share capacity is within 3× of it and stays on
    the axis (top = 275 × 1.12 = 308 GB); the 2,199 GB node capacity is not, so the axis
    leaves it out and the note names it, marked off the axis."""
    panel = _node_panel()
    scale = panel_scale(panel)
    assert scale.top == 275 * GB * 1.12 and scale.off_scale == frozenset({1})
    assert capacity_note(panel, scale, "gb") == [
        "Rank share 275 GB",
        "Node 2,199 GB ↑ off the axis",
    ]


def test_shared_capacity_is_named_once_and_labels_shorten() -> None:
    bars = tuple(
        Bar(n, (Segment("weights", 40 * GB, 50 * GB),), 84_932_558_848, 76_439_302_963)
        for n in ("Steady", "Forward")
    )
    panel = Panel("hbm", "HBM", bars)
    assert capacity_note(panel, panel_scale(panel), "gb") == ["usable 84.9 GB · limit 76.4 GB"]
    assert bar_label(bars[0], "gb") == "40.0–50.0"
    assert bar_label(bars[0], "gb", compact=True) == "50.0"


def test_per_step_tab_shows_tokens_and_offload_traffic(qtbot: Any, window: Any) -> None:
    doc = window.doc
    doc.set_many(
        {"parallelism.strategy": "zero3", "offload.optimizer": "cpu"}, "offload the optimizer"
    )
    qtbot.waitUntil(lambda: not doc.pending)
    text = window.traffic.toPlainText()
    assert "32,768 real tokens" in text
    t = doc.estimate.nodes.transfers
    assert t.device_host_bytes_per_rank > 0 and t.verdict in text
    assert "Communication per step" in text


def test_preset_chooser_follows_an_import(qtbot: Any, window: Any, tmp_path: Path) -> None:
    tab = window.tabs["model"]
    assert tab.preset.currentData() == "llama-3.1-8b"
    (tmp_path / "smol").mkdir()
    cfg = tmp_path / "smol" / "config.json"
    cfg.write_text(json.dumps(SMOL_CONFIG), encoding="utf-8")
    assert tab.import_path(str(cfg), folder=False)
    assert tab.preset.currentIndex() == -1 and tab.preset.placeholderText() == "Imported: smol"
    window.doc.undo()
    assert tab.preset.currentData() == "llama-3.1-8b"


def test_cancelled_export_writes_nothing(qtbot: Any, window: Any, tmp_path: Path) -> None:
    actions = window.report_actions
    out = tmp_path / "cancelled.pdf"
    assert actions.export_to(str(out), "a4") and actions.busy
    assert actions.status.isVisible()
    actions.status.cancel_button.click()
    qtbot.waitUntil(lambda: not actions.busy, timeout=60_000)
    assert not out.exists() and not list(tmp_path.glob(".cancelled.pdf.part-*"))
    assert actions.last_written is None and not actions.status.isVisible()
    assert actions.export_to(str(out), "a4")
    qtbot.waitUntil(lambda: actions.last_written is not None, timeout=60_000)
    assert out.read_bytes()[:4] == b"%PDF"


def test_legend_entries_never_break_inside() -> None:
    """Qt's line breaking breaks after an en dash ("low–" | "high range" at 1920 px):
    every entry joins its words with non-breaking spaces and its dashes with word
    joiners, so the legend wraps only between entries."""
    from gui.views.chart import legend_html

    html = legend_html(["weights", "activations"], spread=True)
    assert "low\u2060–\u2060high&nbsp;range" in html
    assert "limit&nbsp;=&nbsp;capacity&nbsp;−&nbsp;headroom" in html
