"""``memplan compare`` and ``memplan sweep``: text, ``--json`` and ``--csv`` carry the
engine's figures; bad input is an exit code with one line."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from engine import FORMULA_VERSION
from engine.cli import main
from engine.estimate import estimate
from engine.plan import Plan, default_plan, with_value
from engine.planfile import PlanFile, save


def _file(tmp_path: Path, name: str, plan: Plan) -> str:
    path = tmp_path / name
    save(PlanFile(plan=plan, name=name), path)
    return str(path)


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(list(args))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_compare_json_has_both_plans_inputs_and_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = with_value(default_plan(), "policy.max_gpus", 64)
    b = with_value(a, "batch.seq_len", 8192)
    rc, out, _ = _run(
        capsys,
        "compare",
        _file(tmp_path, "a.memplan", a),
        _file(tmp_path, "b.memplan", b),
        "--json",
    )
    assert rc == 0
    doc: Any = json.loads(out)
    assert doc["json_version"] == 1 and doc["formula_version"] == FORMULA_VERSION
    assert [p["name"] for p in doc["plans"]] == ["a.memplan", "b.memplan"]
    eb = estimate(b)
    assert doc["plans"][1]["fit_peak"] == {
        "low_bytes": eb.fit_peak.low,
        "high_bytes": eb.fit_peak.high,
    }
    assert doc["plans"][1]["verdict"] == eb.verdict
    assert doc["plans"][0]["counts"]["first_layout"] is not None
    assert doc["inputs"] == [
        {"path": "batch.seq_len", "values": [4096, 8192], "absent": [False, False]}
    ]
    acts = next(r for r in doc["rows"] if r["id"] == "hbm.activations.saved.layers")
    lo = acts["values"][1]["low_bytes"] - acts["values"][0]["low_bytes"]
    assert acts["deltas"][0]["low_bytes"] == lo > 0 and acts["differs"]


def test_compare_text_with_an_edited_copy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One plan and ``--set``: the plan against its edited copy, named so."""
    a = _file(tmp_path, "a.memplan", default_plan())
    rc, out, _ = _run(capsys, "compare", a, "--set", "method.kind=lora", "--no-counts")
    assert rc == 0
    assert "a.memplan (edited)" in out and "method.kind" in out
    assert "hbm.weights.frozen" in out and "absent" in out


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ([], "two or more plans"),
        (["SECOND", "--set", "batch.seq_len=1"], "single plan"),
    ],
)
def test_compare_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], words: str
) -> None:
    a = _file(tmp_path, "a.memplan", default_plan())
    args = [a if x == "SECOND" else x for x in extra]
    rc, _, err = _run(capsys, "compare", a, *args)
    assert rc == 2 and words in err


def test_compare_unreadable_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.memplan"
    bad.write_text("{", encoding="utf-8")
    rc, _, err = _run(capsys, "compare", str(bad), str(bad))
    assert rc == 1 and "bad.memplan" in err


def test_sweep_text_marks_the_boundary_and_the_plan_value(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The default plan fits at 4,096 tokens and not at 8,192 (the golden estimates):
    the boundary mark sits on 4,096, which is also the plan's own value (*)."""
    rc, out, _ = _run(capsys, "sweep", "--vary", "batch.seq_len=1024:16384:x2")
    assert rc == 0
    line = next(ln for ln in out.splitlines() if ln.startswith("*4,096"))
    assert "◀ largest that fits" in line
    assert "Fit boundary: largest batch.seq_len that fits: 4,096." in out


def test_sweep_json_and_csv_agree_with_the_engine(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, "sweep", "--vary", "parallelism.tp=1,3,2", "--json")
    assert rc == 0
    doc = json.loads(out)
    assert doc["field"] == "parallelism.tp" and doc["formula_version"] == FORMULA_VERSION
    assert [p["valid"] for p in doc["points"]] == [True, False, True]
    assert "heads" in doc["points"][1]["reason"]
    e = estimate(with_value(default_plan(), "parallelism.tp", 2))
    assert doc["points"][2]["peak"] == {"low_bytes": e.fit_peak.low, "high_bytes": e.fit_peak.high}
    rc, out, _ = _run(capsys, "sweep", "--vary", "parallelism.tp=1,3,2", "--csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["verdict"] for r in rows] == ["fits", "invalid", "fits"]
    assert rows[2]["peak_high_bytes"] == str(e.fit_peak.high)
    assert rows[1]["peak_high_bytes"] == ""


@pytest.mark.parametrize(
    "vary", ["batch.seq_len", "batch.nope=1,2", "batch.seq_len=1:8", "batch.hold_fixed=1:2:+1"]
)
def test_sweep_bad_vary_is_a_usage_error(capsys: pytest.CaptureFixture[str], vary: str) -> None:
    rc, _, err = _run(capsys, "sweep", "--vary", vary)
    assert rc == 2 and err.startswith("memplan: --vary:")
