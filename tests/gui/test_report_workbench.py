"""The report's additions: the formula version on the title page, the exception list,
the Topology section, and the comparison and sweep when asked (CLI and window)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from report_helpers import have_poppler, pdf_text

from engine import FORMULA_VERSION
from engine.cli.common import with_model
from engine.estimate import estimate
from engine.plan import default_plan, with_value, with_values
from engine.planfile import PlanFile, save
from engine.whatif.compare import compare
from engine.whatif.sweep import SweepSpec, sweep
from gui.report.content import WIDE_RANGE_PERCENT, gather
from gui.report.sections.exceptions import changed_inputs, warnings, wide_rows

pytestmark = pytest.mark.skipif(not have_poppler(), reason="needs poppler-utils")


def test_changed_inputs_against_defaults_and_the_preset() -> None:
    """Two edits are exactly two lines, in field order (batch before parallelism); a
    70B plan built from its preset changes nothing in the model section (compared with
    the preset, not with the 8B defaults) — its edited layer count is one line."""
    plan = with_values(default_plan(), {"parallelism.strategy": "zero3", "batch.seq_len": 8192})
    assert changed_inputs(plan) == [
        ("batch.seq_len", 8192, 4096),
        ("parallelism.strategy", "zero3", "fsdp2"),
    ]
    big = with_model(default_plan(), "llama-3.1-70b")
    assert changed_inputs(big) == []
    assert changed_inputs(with_value(big, "model.architecture.layers", 40)) == [
        ("model.architecture.layers", 40, 80)
    ]


def test_wide_rows_follow_the_threshold(qapp: Any) -> None:
    """A row is wide when (high − low) ≥ p % of its location's peak. For the default plan
    each HBM row's share is (high − low) / fit peak high; the list at p holds exactly the
    rows whose share is ≥ p, widest first, and p = 100 leaves none."""
    plan = default_plan()
    est = estimate(plan)
    shares = {r.id: (r.high - r.low) / est.fit_peak.high for r in est.rows if r.location == "hbm"}
    for p in (WIDE_RANGE_PERCENT, 10.0, 100.0):
        c = gather(PlanFile(plan=plan), wide_percent=p)
        hbm = [r.id for r, _ in wide_rows(c) if r.location == "hbm"]
        assert set(hbm) == {i for i, s in shares.items() if s * 100 >= p}
    assert wide_rows(gather(PlanFile(plan=plan), wide_percent=100.0)) == []


def test_warnings_name_the_verdict_and_the_exports(qapp: Any) -> None:
    plan = with_value(default_plan(), "batch.seq_len", 16384)
    c = gather(PlanFile(plan=plan))
    notes = warnings(c)
    assert notes[0] == f"Verdict: {c.est.verdict_reason}"
    # the exports' notes stay with their listing in the appendix, not among the warnings
    assert not any(" export:" in n for n in notes)
    assert len(notes) == len(set(notes))


def test_comparison_or_sweep_of_another_plan_is_left_out(qapp: Any) -> None:
    plan = default_plan()
    other = with_value(plan, "batch.seq_len", 2048)
    cmp = compare([("a", other), ("b", with_value(other, "batch.micro_batch", 2))], False)
    swept = sweep(other, SweepSpec("batch.micro_batch", (1, 2)))
    c = gather(PlanFile(plan=plan), comparison=cmp, sweep=swept)
    assert c.comparison is None and c.sweep is None
    assert any("comparison" in p for p in c.problems)
    assert any("sweep" in p for p in c.problems)


def test_report_cli_with_compare_and_sweep(tmp_path: Path, qapp: Any) -> None:
    """``memplan report --compare OTHER --sweep …``: the PDF has the formula version on
    the title page, the exception list, the Topology section, the sweep with its fit
    boundary and the comparison appendix with the other plan's name."""
    from gui.__main__ import main

    plan, other = default_plan(), with_value(default_plan(), "batch.seq_len", 8192)
    a, b = tmp_path / "a.memplan", tmp_path / "b.memplan"
    save(PlanFile(plan=plan, name="Plan A"), a)
    save(PlanFile(plan=other, name="Plan B"), b)
    out = tmp_path / "r.pdf"
    rc = main(
        [
            "report",
            str(a),
            "-o",
            str(out),
            "--compare",
            str(b),
            "--sweep",
            "batch.seq_len=1024:8192:x2",
        ]
    )
    assert rc == 0
    text = pdf_text(out)
    assert f"Formula version {FORMULA_VERSION} (the engine's rules for every row)" in text
    assert "Exceptions — changed inputs, wide ranges, warnings" in text
    assert "Inputs changed from their defaults: 0" in text
    assert "Topology" in text and "rank 7" in text and "NVLink (inside a node)" in text
    assert "Sweep — peak HBM against batch.seq_len" in text
    assert "Fit boundary: largest batch.seq_len that fits: 4,096." in text
    assert "Appendix — comparison with other plans" in text and "b.memplan" in text
    assert "Inputs that differ: 1" in text


def test_report_cli_bad_sweep_is_a_usage_error(tmp_path: Path, capsys: Any) -> None:
    from gui.__main__ import main

    rc = main(["report", "-o", str(tmp_path / "r.pdf"), "--sweep", "batch.seq_len=1:2"])
    assert rc == 2 and "--sweep" in capsys.readouterr().err


def test_window_export_includes_what_was_asked(qtbot: Any, window: Any, tmp_path: Path) -> None:
    """A sweep ticked "Include in the report" in the window is in the exported PDF; the
    same export without the tick has no sweep section."""
    panel = window.workbench.sweep
    panel.values.setText("1,2")
    index = next(
        i for i in range(panel.field.count()) if panel.field.itemData(i)[0] == "batch.micro_batch"
    )
    panel.field.setCurrentIndex(index)
    assert panel.run()
    qtbot.waitUntil(lambda: panel.result is not None and not panel.runner.busy, timeout=60_000)
    plain = tmp_path / "plain.pdf"
    assert window.report_actions.export_to(str(plain), "a4")
    qtbot.waitUntil(lambda: window.report_actions.last_written is not None, timeout=60_000)
    assert "Sweep — peak HBM" not in pdf_text(plain)
    panel.include.setChecked(True)
    swept = tmp_path / "swept.pdf"
    assert window.report_actions.export_to(str(swept), "a4")
    qtbot.waitUntil(lambda: window.report_actions.last_written is not None, timeout=60_000)
    assert "Sweep — peak HBM against batch.micro_batch" in pdf_text(swept)
