"""The formula version travels with the plan's figures: in ``estimate --json`` and in the
metadata of a saved file, outside the config hash (the inputs' identity)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import engine
from engine import FORMULA_VERSION, planfile
from engine.cli import main
from engine.plan import default_plan


def test_formula_version_is_a_positive_integer_distinct_from_the_app_version() -> None:
    assert isinstance(FORMULA_VERSION, int) and FORMULA_VERSION >= 1
    assert str(FORMULA_VERSION) != engine.__version__


def test_estimate_json_names_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["formula_version"] == FORMULA_VERSION


def test_saved_files_store_it_without_changing_the_hash(tmp_path: Path) -> None:
    """The hash is of the plan's canonical inputs only: a file written under any formula
    version hashes the same plan the same way, and reading gives the version back."""
    plan = default_plan()
    path = tmp_path / "p.memplan"
    planfile.save(planfile.PlanFile(plan=plan), path)
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert doc["formula_version"] == FORMULA_VERSION
    assert doc["config_hash"] == plan.config_hash()
    back = planfile.load(path)
    assert back.formula_version == FORMULA_VERSION and back.extra_messages == ()
    doc["formula_version"] = FORMULA_VERSION + 7  # a file from another engine
    path.write_text(json.dumps(doc), encoding="utf-8")
    other = planfile.load(path)
    assert other.formula_version == FORMULA_VERSION + 7
    assert other.config_hash == plan.config_hash() and other.extra_messages == ()


def test_a_file_without_it_still_opens(tmp_path: Path) -> None:
    path = tmp_path / "old.memplan"
    doc = planfile.to_document(planfile.PlanFile(plan=default_plan()))
    del doc["formula_version"]
    path.write_text(json.dumps(doc), encoding="utf-8")
    assert planfile.load(path).formula_version is None
