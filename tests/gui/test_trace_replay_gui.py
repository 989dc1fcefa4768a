"""Allocated and reserved side by side in the window's trace panel, chart and the report.

The trace is the hand-built result of ``tests/trace/test_records.py`` (47,000,000,000 B
allocated) with three allocation events: 6 MiB made and freed on the default stream,
then 6 MiB on FSDP2's all-gather stream. By the caching allocator's rules
(``c10/cuda/CUDACachingAllocator.cpp``: a large request under 10 MiB takes a 20 MiB
segment; a stream reuses only its own cached blocks) the replay reserves two 20 MiB
segments: 41,943,040 B, with 34 MiB (35,651,584 B) of fragmentation at that peak.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from report_helpers import have_poppler, pdf_text

from engine.plan import Plan
from engine.planfile import PlanFile
from engine.trace.alloc_log import AllocEvent
from engine.trace.record import trace_record
from engine.units import MiB
from engine.validation import attach
from engine.validation.records import MeasuredRecord
from tests.trace.test_records import fake_result

PLAN = Plan()
EVENTS = tuple(
    AllocEvent(kind, 6 * MiB, block, stream, "1/backward")
    for kind, block, stream in (("alloc", 0, 0), ("free", 0, 0), ("alloc", 1, 1))
)


def record() -> MeasuredRecord:
    return trace_record(PLAN, dataclasses.replace(fake_result(), alloc_events=EVENTS), "p")


def test_the_panel_and_chart_show_reserved_beside_allocated(qtbot: Any, window: Any) -> None:
    window.results.setCurrentWidget(window.measured)
    view = window.measured.view
    view.trace.refresh(window.doc, "gb")
    view.trace._finished(record())
    status = view.trace.status.text()
    assert "peak allocated 47.00 GB" in status and "peak reserved 0.04 GB" in status
    assert "(allocator replay)" in status
    view.show_document(window.doc, "gb")
    caption = view.chart.caption()
    assert caption.startswith("Allocated (traced) 47.00 GB · reserved (allocator replay) 0.04 GB")
    assert "2 stream(s), expandable_segments off" in caption
    assert "ledger reserved" in view.toPlainText()


def test_a_record_without_the_replay_says_so(qtbot: Any, window: Any) -> None:
    old = trace_record(PLAN, fake_result(), "p")
    old = old.model_copy(update={"extra": {k: v for k, v in old.extra.items() if k != "replay"}})
    window.doc.set_measurements((old.to_json(),), "attach")
    view = window.measured.view
    view.show_document(window.doc, "gb")
    assert "reserved: not replayed" in view.chart.caption()


@pytest.mark.skipif(not have_poppler(), reason="poppler-utils (pdftotext) missing")
def test_the_report_prints_the_replay(qapp: Any, tmp_path: Path) -> None:
    from gui.report import gather, write_pdf

    pf = attach(PlanFile(plan=PLAN, name="traced"), [record()])[0]
    path = tmp_path / "traced.pdf"
    write_pdf(gather(pf, "both"), path, "a4")
    text = pdf_text(path)
    assert "Replay peak reserved" in text and "41,943,040 B" in text
    assert "Replay fragmentation" in text and "Ledger range (reserved)" in text
    assert "Replay reserved − allocated" in text
    assert "expandable_segments:False" in text
