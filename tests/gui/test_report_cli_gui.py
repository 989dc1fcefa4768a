"""`memplan report` from the command line and File → Export Report… in the window,
plus the Qt-free pieces (default marks, file names) and the chart's paper rendering."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from report_helpers import have_poppler, pdf_info

from engine.plan import default_plan, with_values
from gui.__main__ import main
from gui.report.actions import report_file_name
from gui.report.inputs import all_inputs, section_inputs, show


def test_default_plan_inputs_are_all_default() -> None:
    """The default plan relies on every default: no input line is marked as set."""
    lines = [ln for section in all_inputs(default_plan()).values() for ln in section]
    assert lines and all(ln.is_default for ln in lines)


def test_one_change_marks_exactly_that_field() -> None:
    """seq_len 8192 (default 4096) → batch.seq_len is the only non-default, shown with
    thousands separators beside its default."""
    plan = with_values(default_plan(), {"batch.seq_len": 8192})
    changed = [ln for section in all_inputs(plan).values() for ln in section if not ln.is_default]
    assert [(ln.path, ln.value_text, ln.default_text) for ln in changed] == [
        ("batch.seq_len", "8,192", "4,096")
    ]


def test_model_defaults_compare_per_field() -> None:
    """A different hidden size marks model.architecture.hidden, while the untouched
    architecture fields (e.g. the vocabulary) still count as defaults."""
    plan = with_values(default_plan(), {"model.architecture.hidden": 2048})
    lines = {ln.path: ln for ln in section_inputs(plan, "model")}
    assert not lines["model.architecture.hidden"].is_default
    assert lines["model.architecture.vocab"].is_default


def test_show_ranges_and_bytes() -> None:
    """Byte fields get GB/GiB; ranges print as low–high."""
    assert show("hardware.hbm_bytes", 80 * 10**9) == ("80,000,000,000 B (80.00 GB / 74.51 GiB)")
    assert show("runtime.allocator_reserve", {"low": 0.05, "high": 0.2}) == "0.05–0.2"
    assert show("batch.global_batch", None) == "none (derived)"


def test_report_file_name() -> None:
    assert report_file_name("8B full fine-tune, one DGX") == "8B-full-fine-tune-one-DGX-report.pdf"
    assert report_file_name("???") == "memplan-report-report.pdf"


def test_paint_estimate_draws_on_paper_ink(qapp: Any) -> None:
    """The chart drawn for paper puts dark ink on a white image (the window's palette
    may be dark; the report forces dark text)."""
    from PySide6.QtCore import QRectF
    from PySide6.QtGui import QColor, QImage, QPainter

    from engine.estimate import estimate
    from gui.views.chart_paint import paint_estimate

    plan = default_plan()
    img = QImage(800, 300, QImage.Format.Format_ARGB32)
    img.fill(QColor("white"))
    painter = QPainter(img)
    paint_estimate(painter, QRectF(0, 0, 800, 300), plan, estimate(plan), "gb", QColor("#000000"))
    painter.end()
    dark = sum(
        1
        for y in range(0, 300, 3)
        for x in range(0, 800, 3)
        if img.pixelColor(x, y).lightness() < 80
    )
    assert dark > 200


def test_cli_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["report", "-o", "x.pdf", "--page", "a3"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        main(["report"])  # -o is required
    assert exc.value.code == 2


def test_cli_bad_plan_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A plan the engine refuses (TP 3 does not divide Llama-3.1-8B's 32 heads) → 1 with
    the engine's message, and no PDF. (Parameter-only ZeRO-3 offload, the case this test
    used, is legal since DeepSpeed runs it: ``_configure_offloading`` sets the two apart.)"""
    out = tmp_path / "bad.pdf"
    code = main(
        [
            "report",
            "-o",
            str(out),
            "--set",
            "parallelism.tp=3",
        ]
    )
    assert code == 1
    assert "plan cannot be computed" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.skipif(not have_poppler(), reason="poppler-utils missing")
def test_cli_letter_report(qapp: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`memplan report -o FILE --page letter --units gib` writes a US Letter PDF
    (612 × 792 pt) and says how many pages it wrote."""
    out = tmp_path / "letter.pdf"
    assert main(["report", "-o", str(out), "--page", "letter", "--units", "gib"]) == 0
    said = capsys.readouterr().out
    info = pdf_info(out)
    assert info["Page size"].startswith("612 x 792")
    assert f"({info['Pages']} pages" in said


def test_file_menu_exports_report(qtbot: Any, window: Any, tmp_path: Path) -> None:
    """File → Export Report… (Ctrl+E) and Print… (the platform's Print key) are in the
    File menu; exporting writes a PDF and says so in the status bar."""
    from PySide6.QtGui import QKeySequence

    actions = window.report_actions
    file_menu = window.menuBar().actions()[0].menu()
    assert actions.export in file_menu.actions() and actions.print in file_menu.actions()
    assert actions.export.shortcut() == QKeySequence("Ctrl+E")
    assert actions.print.shortcut() == QKeySequence(QKeySequence.StandardKey.Print)
    out = tmp_path / "from-gui.pdf"
    assert actions.export_to(str(out), "a4")
    qtbot.waitUntil(lambda: actions.last_written is not None, timeout=60_000)
    assert out.read_bytes()[:4] == b"%PDF"
    assert str(out) in window.statusBar().currentMessage()


def test_export_error_goes_to_a_dialog(window: Any, tmp_path: Path, monkeypatch: Any) -> None:
    """Writing into a folder that does not exist shows an error dialog, returns False."""
    from gui import dialogs

    shown: list[str] = []
    monkeypatch.setattr(dialogs, "show_error", lambda _p, title, text: shown.append(text))
    assert not window.report_actions.export_to(str(tmp_path / "missing" / "r.pdf"), "a4")
    assert shown and "missing" in shown[0]


def test_mounting_report_loads_no_qt() -> None:
    """`memplan estimate` stays fast: building the parser (which mounts `report`) does
    not import PySide6 — checked in a fresh interpreter."""
    import subprocess
    import sys

    code = (
        "import sys; from gui.__main__ import build_parser; build_parser(); "
        "print(any(m.startswith('PySide6') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
