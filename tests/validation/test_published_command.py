"""``memplan validate-published``: the table, the summary line and the ``--json`` form."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main
from engine.validation.published import load_cases

ONE_CASE = {
    "id": "one",
    "stack": "pytorch DDP",
    "source": {"url": "https://example.org/run", "where": "", "date": ""},
    "quote": "a run",
    "measured": {"basis": "fits"},
    "expressible": "yes",
    "memplan": {"preset": "llama-3.2-1b", "set": {"hardware.accelerator": "h100-sxm-80gb"}},
}


def test_text_table_has_every_case_and_the_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate-published"]) == 0
    out = capsys.readouterr().out
    cases = load_cases()
    assert all(c.id in out for c in cases)
    assert f"Summary: {len(cases)} cases from" in out
    assert "Not expressible (the knob MemPlan lacks):" in out


def test_json_form_agrees_with_the_cases(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate-published", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    cases = load_cases()
    assert doc["summary"]["cases"] == len(cases) == len(doc["cases"])
    assert doc["summary"]["expressible"] == sum(c.expressible for c in cases)
    assert doc["summary"]["inside"] == sum(r["inside"] for r in doc["cases"] if r["expressible"])


def test_a_cases_file_of_one_fits_case(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A 1B model on an 80 GB card: the fit peak's low end is far below the card, so the
    case is inside; a fits case has no error figure."""
    f = tmp_path / "cases.jsonl"
    f.write_text(json.dumps(ONE_CASE) + "\n", encoding="utf-8")
    assert main(["validate-published", "--cases", str(f), "--json"]) == 0
    (case,) = json.loads(capsys.readouterr().out)["cases"]
    assert case["inside"] is True and case["error_pct"] is None and not case["contradicts"]


def test_missing_or_bad_file_is_a_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate-published", "--cases", str(tmp_path / "none.jsonl")]) == 1
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x"}\n', encoding="utf-8")
    assert main(["validate-published", "--cases", str(bad)]) == 1
    assert "missing 'source'" in capsys.readouterr().err


def test_report_method_note_reads_the_suite() -> None:
    """The PDF report's assumptions section cites the suite with the engine's own figures."""
    from engine.validation.published import suite_summary
    from gui.report.sections.measuring import published_note

    s = suite_summary()
    assert s is not None
    note = published_note()
    assert "validate-published" in note and f"{s.cases} cases from {s.sources} sources" in note
