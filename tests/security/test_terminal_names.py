"""Names reach the terminal and the PDF's metadata as one printable line (issue 33).

A plan's name, a file's name and a message quoting them can hold escape sequences
(``ESC ]0;…`` retitles a terminal, ``ESC [2J`` clears it) and line breaks that forge
output lines; ``engine.fileio.oneline.one_line`` is the rule, checked here on its own and where
``validate``, ``compare``, the export notes and the report print names.
"""

from __future__ import annotations

import shutil
import subprocess
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.cli import main
from engine.fileio.oneline import docstring_text, one_line
from engine.plan import default_plan, with_values
from engine.planfile import PlanFile, save

EVIL = "Evil\x1b]0;owned\x07\x1b[2J\nforged: valid MemPlan plan\r\u2028x\x00\x85"


def test_one_line_by_hand() -> None:
    """Each control or separator one space, the bidi override gone, ends stripped."""
    assert one_line("a\nb\rc\u2028d\x0be\x0cf\x00g\x85h") == "a b c d e f g h"
    assert one_line("\u202eevil\u2066 x\n") == "evil x"
    assert one_line("\x1b[31mred") == "[31mred"
    assert one_line("plain name — ok") == "plain name — ok"
    assert one_line("x" * 10, limit=5) == "xxxx…"
    assert docstring_text('a"""b\\N{') == 'a\\"\\"\\"b\\\\N{'


@given(st.text(max_size=60))
def test_one_line_is_one_printable_line(text: str) -> None:
    """No control, format, separator or surrogate character survives (unassigned and
    private-use characters may: they split nothing)."""
    out = one_line(text)
    assert not {unicodedata.category(ch) for ch in out} & {"Cc", "Cf", "Cs", "Zl", "Zp"}
    assert len(out.splitlines()) <= 1
    assert one_line(out) == out  # idempotent
    doc = f'"""{docstring_text(text)}"""'
    assert eval(doc) == out


def test_validate_prints_the_name_as_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "p.memplan"
    save(PlanFile(plan=default_plan(), name=EVIL), path)
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\r" not in out and "\x00" not in out
    assert out.count("\n") == 1, out
    assert f"valid MemPlan plan '{one_line(EVIL)}'" in out


def test_compare_prints_file_names_as_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = tmp_path / "a\x1b[2J\nb.memplan"
    b = tmp_path / "other.memplan"
    save(PlanFile(plan=default_plan(), name="a"), a)
    save(PlanFile(plan=with_values(default_plan(), {"batch.micro_batch": 2}), name="b"), b)
    assert main(["compare", str(a), str(b), "--no-counts"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out
    assert "deltas against a [2J b.memplan" in out


def test_export_notes_quote_the_name_on_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """torchtitan's note names a model that is not in its registry: one line."""
    plan = with_values(default_plan(), {"model.name": EVIL, "model.preset": None})
    path = tmp_path / "p.memplan"
    save(PlanFile(plan=plan, name="p"), path)
    assert main(["export", str(path), "--format", "torchtitan", "-o", str(tmp_path / "r.py")]) == 0
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\r" not in err
    assert f"{one_line(EVIL)} is not one of them" in err
    assert all(line.startswith("memplan: ") for line in err.splitlines())


@pytest.mark.skipif(shutil.which("pdfinfo") is None, reason="needs poppler's pdfinfo")
def test_pdf_title_is_one_line(qapp: Any, tmp_path: Path) -> None:
    from gui.report import gather, write_pdf

    path = tmp_path / "r.pdf"
    write_pdf(gather(PlanFile(plan=default_plan(), name=EVIL), "both"), path, "a4")
    info = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True, check=True)
    (title,) = [ln for ln in info.stdout.splitlines() if ln.startswith("Title:")]
    assert title.split(":", 1)[1].strip() == f"MemPlan report — {one_line(EVIL)}"
