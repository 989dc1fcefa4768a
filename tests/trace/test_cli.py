"""``memplan trace``: refusals, the missing extra, Ctrl-C, and a real trace saved into
a plan and compared by validate-run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main
from engine.planfile import PlanFile, load, save
from engine.trace import extra
from tests.trace.grid import Case
from tests.trace.needs_extra import needs_trace_extra


def test_refused_plan_exits_1_with_one_reason(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "--set", "parallelism.strategy=zero3"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("memplan: DeepSpeed") and "\n" not in err


def test_missing_extra_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(extra, "missing_packages", lambda: ["torch"])
    assert main(["trace"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"memplan: {extra.EXTRA_MESSAGE}"


@needs_trace_extra
def test_ctrl_c_stops_cleanly(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import engine.trace.runner as runner

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "trace_plan", interrupted)
    assert main(["trace"]) == 130
    assert capsys.readouterr().err.strip() == "memplan: trace interrupted"


@needs_trace_extra
def test_trace_prints_saves_and_validates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, record = tmp_path / "tiny.memplan", tmp_path / "record.json"
    save(PlanFile(plan=Case("llama", {"strategy": "fsdp4"}).plan(), name="tiny"), path)
    assert main(["trace", str(path), "--save", "-o", str(record)]) == 0
    captured = capsys.readouterr()
    assert "Traced peak allocated" in captured.out and "Ledger estimate" in captured.out
    # the allocator replay beside it: PyTorch's default settings (a pytorch-stack plan),
    # FSDP2's all-gather and reduce-scatter buffers in pools of their own
    assert "Reserved (allocator replay, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False)" in (
        captured.out
    )
    assert "3 streams, each with its own pools" in captured.out
    assert "ledger reserved" in captured.out
    assert "[" in captured.err and "step 2 of 2" in captured.err and "done" in captured.err
    doc = json.loads(record.read_text())
    assert doc["kind"] == "trace" and doc["world_size"] == 4
    replayed = doc["extra"]["replay"]
    assert replayed["streams"] == [0, 1, 2] and replayed["events"] == len(doc["alloc_events"])
    assert replayed["peak_reserved"] >= replayed["peak_allocated"] >= doc["max_allocated_bytes"]
    assert load(path).measurements[0]["kind"] == "trace"
    assert main(["validate-run", str(path)]) == 0
    assert "simulated (trace)" in capsys.readouterr().out
    assert main(["trace", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["peak_bytes"] == doc["max_allocated_bytes"]
    assert out["replay"]["peak_reserved"] == replayed["peak_reserved"]
    assert out["ledger_reserved"][0] <= out["ledger_reserved"][1]
