"""The report's fit levers: the same levers and numbers as `memplan layouts` prints for
the plan, as the window's rows; left out (and said so) with ``--no-levers``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from report_helpers import have_poppler, pdf_text

import engine.analysis as an
from engine.cli.text import render_levers
from engine.layout.levers import fit_levers
from engine.plan import default_plan, with_values
from engine.planfile import PlanFile
from gui.__main__ import main
from gui.views.lever_rows import with_vs_without

pytestmark = pytest.mark.skipif(not have_poppler(), reason="poppler-utils (pdftotext) missing")
HEADING = "Fit levers (alternatives, never applied)"


def test_the_report_lists_the_levers_the_cli_prints(qapp: Any, tmp_path: Path) -> None:
    """For the default plan at sequence 6,144 up to 64 GPUs (arithmetic minimum 4, which
    every lever lowers; at 4,096 it is 3 and full recompute keeps 3): every lever
    `memplan layouts` names (its render_levers text, "procure N GPUs (LAYOUT),
    arithmetic minimum M") is a row of the report with the same N set against the plan's
    own count, the same layout and the same minimum against the plan's own, and the
    same cost."""
    from gui.report import gather, write_pdf

    plan = with_values(default_plan(), {"policy.max_gpus": 64, "batch.seq_len": 6144})
    base = an.analysis(plan).counts
    assert base.arithmetic_min.gpus == 4
    levers = fit_levers(plan)
    cli = render_levers(levers, base)
    path = tmp_path / "levers.pdf"
    write_pdf(gather(PlanFile(plan=plan, name="levers")), path, "a4")
    text = pdf_text(path)
    assert HEADING in text
    section = text[text.index(HEADING) :]
    assert len(levers) == 4
    for lv in levers:
        assert lv.counts is not None and lv.gpus is not None
        lay = lv.counts.first_layout.layout
        m = lv.counts.arithmetic_min.gpus
        gpus = f"{lv.gpus} GPU{'s' * (lv.gpus != 1)}"
        assert f"procure {gpus} ({lay.label()}), arithmetic minimum {m}" in cli
        name = lv.name[:1].upper() + lv.name[1:]
        assert name in section
        assert with_vs_without(lv.gpus, base.first_layout.gpus) in section
        assert f"{m} instead of {base.arithmetic_min.gpus}" in section
        assert " ".join(lv.cost.split())[:40] in section


def test_no_levers_leaves_them_out_and_says_so(qapp: Any, tmp_path: Path) -> None:
    out = tmp_path / "r.pdf"
    assert main(["report", "-o", str(out), "--no-levers", "--set", "policy.max_gpus=16"]) == 0
    text = pdf_text(out)
    assert HEADING in text and "Left out of this report (memplan report --no-levers)" in text
    assert "Full activation recompute" not in text
