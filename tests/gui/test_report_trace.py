"""A trace record in the PDF: a simulated measurement, apart from a GPU run.

The plan is the default one; its stored trace is the hand-built result of
``tests/trace/test_records.py`` (peak 47,000,000,000 B in backward, 12.5 s, torch
2.13.0+cpu), once for this plan's config and once for another config; a GPU record
sits beside them. The figures printed are the engine's comparison of that trace.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from report_helpers import have_poppler, pdf_text

from engine.estimate import estimate
from engine.plan import Plan
from engine.planfile import PlanFile
from engine.trace.compare import compare
from engine.trace.record import trace_record
from engine.validation import attach
from engine.validation.records import MeasuredRecord
from tests.trace.test_records import fake_result

pytestmark = pytest.mark.skipif(not have_poppler(), reason="poppler-utils (pdftotext) missing")

PLAN = Plan()


@pytest.fixture(scope="module")
def pdf(qapp: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from gui.report import gather, write_pdf

    here = trace_record(PLAN, fake_result())
    elsewhere = here.model_copy(update={"config_hash": "d" * 64, "label": "old trace"})
    gpu = MeasuredRecord(
        source="manual",
        label="bench",
        config_hash=PLAN.config_hash(),
        max_allocated_bytes=estimate(PLAN).peak.low,
        world_size=8,
    )
    pf = attach(PlanFile(plan=PLAN, name="traced"), [here, elsewhere, gpu])[0]
    path = tmp_path_factory.mktemp("trace-report") / "traced.pdf"
    write_pdf(gather(pf, "both"), path, "a4")
    return path


@pytest.fixture(scope="module")
def text(pdf: Path) -> str:
    return pdf_text(pdf)


def test_trace_is_a_simulated_measurement_apart_from_gpu_runs(text: str) -> None:
    assert "3 record(s)" in text and "2 of them a simulated measurement (trace)" in text
    assert "trace FSDP2 × 8 rank 0 — simulated measurement (trace), not a GPU run" in text
    assert "bench rank 0 — stage 0: inside — GPU run" in text


def test_trace_facts_are_printed(text: str) -> None:
    """Peak to the byte with its phase, the ledger range, versions, hash, wall time."""
    est = estimate(PLAN)
    assert "47,000,000,000 B in backward (backward somewhere)" in text
    assert f"{est.peak.low:,}–{est.peak.high:,} B" in text
    assert "torch 2.13.0+cpu · transformers 5.24.0 · peft 0.21.2" in text
    assert f"{PLAN.config_hash()[:16]} (this plan)" in text
    assert "12.5 s, 2 steps (the last reported)" in text


def test_trace_per_group_and_phase_are_the_engine_s(text: str, pdf: Path) -> None:
    """Each ledger group's and phase's traced bytes, on its table row (layout text)."""
    cmp = compare(fake_result(), estimate(PLAN))
    assert "Where the trace and the ledger differ" in text
    rows = pdf_text(pdf, layout=True)
    for line in (*cmp.groups, *cmp.phases):
        assert f"{line.name} {line.traced:,} " in rows, line.name


def test_a_trace_of_another_config_is_warned_about(text: str) -> None:
    assert f"{'d' * 16} — this plan is {PLAN.config_hash()[:16]}" in text
    assert f"Warning: traced for config {'d' * 12}, but this plan is" in text
