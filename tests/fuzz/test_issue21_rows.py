"""One regression test per row of issue 21's table (row 8, the search's time budget and
the GUI thread, is tested with the search). Rows 1 and 2 are also tested in-process in
``tests/gui/test_autosave.py``; here they crash real app processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engine import planfile
from engine.errors import PlanFileError
from engine.plan import default_plan
from engine.planfile import PlanFile, load, save, to_document
from gui import dialogs
from gui.document import PlanDocument
from tests.fuzz.memplan_cli import run_memplan
from tests.fuzz.run_processes import run_kills, run_recovery

ROOT = Path(__file__).resolve().parents[2]


def _doc(**changes: Any) -> dict[str, Any]:
    return {**to_document(PlanFile(plan=default_plan(), name="t")), **changes}


def _file(folder: Path, text: str, name: str = "p.memplan") -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def _opened_with_error(window: Any, path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Open ``path`` as File → Open would; returns the one error dialog's text."""
    shown: list[str] = []
    monkeypatch.setattr(dialogs, "show_error", lambda _p, _t, text: shown.append(text))
    assert not window.files.open_file(str(path), ask=False)
    assert len(shown) == 1
    return shown[0]


def test_row1_and_row2_killed_instances_lose_no_plan(tmp_path: Path) -> None:
    """Two instances with unsaved edits killed together; the next start recovers both;
    it is killed at once (row 2's second crash); both plans are still on disk."""
    tally = run_recovery(1, 1, tmp_path)
    assert tally.ok and tally.outcomes["recovered 2"] == 1, tally.problems()


def test_row3_half_an_emoji_is_refused_at_load_and_never_breaks_a_save(
    qtbot: Any, tmp_path: Path
) -> None:
    path = _file(tmp_path, json.dumps(_doc(name="x\ud83d")))
    with pytest.raises(PlanFileError, match=r"^name: holds half of a character"):
        load(path)
    code, err = run_memplan(["validate", str(path)])
    assert code == 1 and "Traceback" not in err and "name: holds half" in err
    doc = PlanDocument()  # the same text typed or pasted into the window
    doc.name = "pasted \ud83d"
    doc.set("batch.seq_len", 1024)
    saved = doc.save(tmp_path / "typed.memplan")
    assert load(saved).name == "pasted \ufffd"


@pytest.mark.parametrize(
    "text",
    ["[" * 1000, '{"a":' * 1000, "[" * 990, '{"plan": ' + "9" * 5000 + "}"],
    ids=["1000 [", "1000 objects", "990 [", "5000 digits"],
)
def test_row4_deep_nesting_and_huge_numbers_get_one_sentence_everywhere(
    qtbot: Any, window: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    path = _file(tmp_path, text, "hostile.memplan")
    with pytest.raises(PlanFileError) as info:
        load(path)
    assert "levels deep" in str(info.value) or "5,000 characters long" in str(info.value)
    code, err = run_memplan(["estimate", str(path)])
    assert code == 1 and "Traceback" not in err
    message = _opened_with_error(window, path, monkeypatch)
    assert str(info.value) in message and window.doc.plan == default_plan()


def test_row5_a_kill_during_save_leaves_no_temp_file_after_the_next_save(
    tmp_path: Path,
) -> None:
    tally = run_kills(3, 5, tmp_path)
    assert tally.ok, tally.problems()


def test_row6_a_1mb_bad_value_gives_a_short_dialog(
    qtbot: Any, window: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = _doc()
    doc["plan"]["batch"]["seq_len"] = "x" * 1_000_000
    message = _opened_with_error(window, _file(tmp_path, json.dumps(doc)), monkeypatch)
    assert "plan.batch.seq_len" in message and len(message) < 400


def test_row7_save_keeps_the_mode_and_writes_through_a_symlink(tmp_path: Path) -> None:
    shared = tmp_path / "shared.memplan"
    save(PlanFile(plan=default_plan()), shared)
    shared.chmod(0o644)
    save(PlanFile(plan=default_plan(), name="again"), shared)
    assert shared.stat().st_mode & 0o777 == 0o644
    link = tmp_path / "link.memplan"
    link.symlink_to(shared)
    save(PlanFile(plan=default_plan(), name="through the link"), link)
    assert link.is_symlink() and load(shared).name == "through the link"


def test_row9_duplicate_keys_are_refused_with_the_key_path(tmp_path: Path) -> None:
    text = json.dumps(_doc())
    text = text.replace('"seq_len": 4096', '"seq_len": 4096, "seq_len": 8192')
    with pytest.raises(PlanFileError, match=r"^plan\.batch\.seq_len: this key appears more"):
        load(_file(tmp_path, text))


def test_row9_a_bom_file_opens(tmp_path: Path) -> None:
    path = tmp_path / "bom.memplan"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(_doc()).encode("utf-8"))
    assert load(path).plan == default_plan()


def test_row9_a_250_byte_file_name_saves(tmp_path: Path) -> None:
    path = tmp_path / ("n" * 242 + ".memplan")
    assert len(os.fsencode(path.name)) == 250
    save(PlanFile(plan=default_plan()), path)
    assert load(path).plan == default_plan()


def test_row9_layouts_with_minus_one_gpus_is_a_usage_error() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "gui", "layouts", "--gpus", "-1"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .endswith("argument --gpus: expected a whole number from 1 to 1,000,000, got '-1'")
    )


@pytest.mark.parametrize("value", [0, -4])
def test_row9_reshard_after_forward_refuses_zero_and_negatives(tmp_path: Path, value: int) -> None:
    doc = _doc()
    doc["plan"]["parallelism"]["knobs"]["fsdp_reshard_after_forward"] = value
    with pytest.raises(PlanFileError, match="fsdp_reshard_after_forward: as a number"):
        load(_file(tmp_path, json.dumps(doc)))


def test_row9_a_bidi_override_in_the_name_does_not_reach_the_report(qtbot: Any) -> None:
    from gui.report.builder import report_html
    from gui.report.content import gather

    pf = PlanFile(plan=default_plan(), name="Plan \u202eevil\u202c name", notes="a\u2067b")
    content = gather(pf)
    html = report_html(content)
    assert content.plan_name == "Plan evil name"  # the page header and the PDF title
    assert "Plan evil name" in html and "ab" in html
    assert not any(c in html for c in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def test_no_save_leaves_debris_or_changes_anything_it_does_not_own(tmp_path: Path) -> None:
    """The sum of rows 5 and 7: after saves of every kind the folder holds the plans and
    the user's own files, nothing else."""
    (tmp_path / ".notes.tmp").write_text("mine", encoding="utf-8")
    for i in range(3):
        planfile.save(PlanFile(plan=default_plan(), name=str(i)), tmp_path / f"{i}.memplan")
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [".notes.tmp", "0.memplan", "1.memplan", "2.memplan"]
