"""A plan's file identity: `created` is stamped once, at the first save, and kept; the
GUI report prints the file's created / modified times; Save As names a never-named plan
after its file, as `memplan new -o FILE` does (gui/files/file_identity.py)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from engine import planfile
from gui import dialogs
from gui.report.content import gather
from gui.report.sections.title import title_page


def test_created_is_kept_across_saves(qtbot: Any, window: Any, tmp_path: Path) -> None:
    """New plan, saved twice a second apart (the stamps have whole seconds): the second
    file's `created` is the first's, and its `modified` is later."""
    doc, path = window.doc, tmp_path / "plan.memplan"
    doc.save(path)
    first = planfile.load(path)
    assert first.created and doc.created == first.created
    time.sleep(1.1)
    doc.set("batch.seq_len", 2048)
    doc.flush()
    doc.save()
    second = planfile.load(path)
    assert second.created == first.created and second.modified > first.modified


def test_the_gui_report_prints_the_files_times(qtbot: Any, window: Any, tmp_path: Path) -> None:
    """It printed "Plan created / modified — / —" for a saved plan."""
    window.doc.save(tmp_path / "p.memplan")
    page = title_page(gather(window.doc.to_planfile(), "gb"))
    assert f"{window.doc.created} / {window.doc.modified}" in page
    assert "— / —" not in page


def test_save_as_names_an_untitled_plan_after_its_file(
    qtbot: Any, window: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "llama-budget.memplan"
    monkeypatch.setattr(dialogs, "save_path", lambda *_a, **_k: str(target))
    assert window.doc.name == "Untitled plan"
    assert window.files.save_plan_as()
    assert window.doc.name == "llama-budget" and planfile.load(target).name == "llama-budget"
    window.doc.set_properties("Budget line 4", "")
    other = tmp_path / "copy.memplan"
    monkeypatch.setattr(dialogs, "save_path", lambda *_a, **_k: str(other))
    assert window.files.save_plan_as()
    assert planfile.load(other).name == "Budget line 4"  # a name the user set is kept


def test_undo_back_to_the_saved_state_is_clean(qtbot: Any, window: Any, tmp_path: Path) -> None:
    """Sequence 2048 typed and saved; 1024 typed on in the same field (it merged into the
    saved step, so Undo went past the file to 4096 and the plan stayed "unsaved"): now
    it is its own step, and Undo returns to the saved 2048, clean."""
    doc = window.doc
    doc.set("batch.seq_len", 2048)
    doc.save(tmp_path / "s.memplan")
    doc.set("batch.seq_len", 1024)
    assert doc.dirty
    doc.undo_stack.undo()
    assert doc.plan.batch.seq_len == 2048 and not doc.dirty
