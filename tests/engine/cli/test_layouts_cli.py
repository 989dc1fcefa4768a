"""``memplan layouts`` (text, ``--fit``, ``--json``) and ``estimate --no-counts``: the
figures printed are engine.analysis's, and the search runs only when asked for."""

from __future__ import annotations

import json
from typing import Any

import pytest

import engine.analysis as an
from engine.cli import main
from engine.layout.shapes import enumerate_layouts
from engine.plan import default_plan, with_value
from engine.whatif.fit import largest_micro_batch, longest_sequence

BOUNDED = ["--max-gpus", "64"]


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    assert main(["layouts", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_layouts_json_lists_counts_chosen_and_alternatives(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The object carries the counts of the same search the text prints: the chosen layout
    is the plan's own when it fits (DP 8; the first legal one, TP2 DP2 on a partial node of
    4, otherwise), alternatives are ranked by headroom (largest first)."""
    doc = _json(capsys, *BOUNDED, "--json")
    plan = with_value(default_plan(), "policy.max_gpus", 64)
    k = an.analysis(plan).counts
    assert doc["config_hash"] == plan.config_hash() and doc["json_version"] == 1
    assert doc["search"]["max_gpus"] == 64 and doc["search"]["estimates"] == k.estimates
    assert doc["arithmetic_min"]["gpus"] == k.arithmetic_min.gpus
    assert doc["first_layout"]["gpus"] == k.first_layout.gpus
    assert doc["first_layout"]["nodes"] == k.nodes
    assert k.first_layout.layout is not None
    assert k.chosen is not None and k.chosen == k.plan_layout
    assert doc["chosen"]["layout"]["label"] == k.chosen.layout.label()
    assert doc["chosen"]["high_bytes"] <= doc["search"]["limit_bytes"]
    heads = [a["headroom_bytes"] for a in doc["alternatives"]]
    assert heads == sorted(heads, reverse=True) and len(heads) == len(k.alternatives)
    assert len(doc["rejected"]) == len(k.rejected)
    assert all(r["reasons"] for r in doc["rejected"])
    assert doc["validation"]["low_gpus"] == k.validation_low.gpus
    assert "fit" not in doc


def test_layouts_fit_text_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    """--fit prints the largest micro-batch and the longest sequence of the plan's own
    layout (the fit searches' values, with their reasons), in text and in JSON."""
    plan = default_plan()
    mb, seq = largest_micro_batch(plan), longest_sequence(plan)
    assert mb.value is not None and seq.value is not None
    assert main(["layouts", *BOUNDED, "--fit"]) == 0
    out = capsys.readouterr().out
    assert "GPU counts (searched up to 64 GPUs" in out
    assert f"largest micro-batch: {mb.value:,}\n    {mb.reason}; searched" in out
    assert f"longest sequence: {seq.value:,} tokens\n    {seq.reason}" in out
    assert "TP1 PP1 CP1 EP1 DP8" in out  # the plan's layout, not the search's choice
    doc = _json(capsys, *BOUNDED, "--fit", "--json")
    assert doc["fit"]["micro_batch"]["value"] == mb.value
    assert doc["fit"]["seq_len"]["value"] == seq.value
    assert doc["fit"]["layout"]["dp"] == plan.parallelism.dp


def test_layouts_gpus_json_lists_the_lattice(capsys: pytest.CaptureFixture[str]) -> None:
    lattice = enumerate_layouts(default_plan(), 8)
    doc = _json(capsys, "--gpus", "8", "--json")
    assert doc["gpus"] == 8
    assert [x["layout"]["label"] for x in doc["legal"]] == [lay.label() for lay in lattice.legal]
    assert len(doc["rejected"]) == len(lattice.rejected)


def test_bad_search_bound_names_the_field(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["layouts", "--max-gpus", "0"]) == 1
    assert "--max-gpus: policy.max_gpus" in capsys.readouterr().err


def test_estimate_without_counts_runs_no_search(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """--no-counts asks the analysis for the estimate only: a search that would fail the
    command is never started; without the flag it is."""

    def no_search(plan: Any, **_: Any) -> Any:
        raise AssertionError("the layout search ran")

    an.forget_analyses()
    monkeypatch.setattr(an, "gpu_counts", no_search)
    assert main(["estimate", "--no-counts"]) == 0
    assert "Verdict:" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="the layout search ran"):
        main(["estimate"])
    an.forget_analyses()
