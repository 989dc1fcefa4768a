"""The generated probe, run against a fake ``torch`` (no GPU, no torch needed).

Scenario used below (GiB = 2^30 B, MiB = 2^20 B), warm-up 2 steps, window 3 steps:

    step  peak allocated  allocated at end  reserved   (memory outside PyTorch: 700 MiB)
    1     30 GiB          20 GiB            32 GiB     ← first step spikes (skipped)
    2     25 GiB          20 GiB            32 GiB     ← reset_peak_memory_stats after it
    3     24 GiB          20 GiB            32 GiB
    4     26 GiB          20 GiB            34 GiB
    5     25 GiB          20 GiB            34 GiB     ← record written

The window's allocated peak is max(20 after the reset, 24, 26, 25) = 26 GiB — not the
warm-up's 30 GiB; reserved peak 34 GiB; device used = reserved + outside = 34 GiB +
700 MiB; external = used − reserved = 700 MiB.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from validation_fakes import FakeCudaState, make_fake_torch

from engine.estimate import estimate
from engine.plan import default_plan
from engine.units import GiB, MiB
from engine.validation.identity import workload_hash
from engine.validation.probe import probe_source, template_text
from engine.validation.reconcile import reconcile
from engine.validation.records import load_records, parse_record

STEPS = [(30, 32), (25, 32), (24, 32), (26, 34), (25, 34)]  # (peak GiB, reserved GiB)


def _load_probe(path: Path, name: str = "memplan_probe_generated") -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def generated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_cuda: FakeCudaState):
    plan = default_plan()
    path = tmp_path / "memplan_probe.py"
    path.write_text(probe_source(plan.config_hash(), workload_hash(plan), "my plan"), "utf-8")
    module = _load_probe(path)
    counter = {"steps": 0}
    fake_cuda.external = 700 * MiB
    fake_cuda.allocated = 20 * GiB
    monkeypatch.setitem(sys.modules, "torch", make_fake_torch(fake_cuda, lambda: counter["steps"]))
    for key, value in {
        "RANK": "3",
        "LOCAL_RANK": "3",
        "WORLD_SIZE": "8",
        "LOCAL_WORLD_SIZE": "8",
    }.items():
        monkeypatch.setenv(key, value)
    return module, plan, counter, tmp_path / "records"


def _train(
    module: ModuleType, state: FakeCudaState, counter: dict[str, int], out: Path, **kwargs: object
) -> list[str | None]:
    probe = module.MemPlanProbe(warmup_steps=2, window_steps=3, out_dir=str(out), **kwargs)
    returned = []
    for peak, reserved in STEPS:
        state.run_step(peak * GiB, 20 * GiB, reserved * GiB)
        counter["steps"] += 1
        returned.append(probe.step())
    return returned


def test_probe_record_from_generated_snippet(generated, fake_cuda: FakeCudaState) -> None:
    module, plan, counter, out = generated
    returned = _train(module, fake_cuda, counter, out, record_memory_stats=True)
    target = out / f"memplan-record-{plan.config_hash()[:12]}-rank00003.json"
    assert returned == [None, None, None, None, str(target)]
    assert fake_cuda.resets == [2]  # the window starts after the 2 warm-up steps
    doc = json.loads(target.read_text("utf-8"))
    assert doc["max_allocated_bytes"] == 26 * GiB
    assert doc["max_reserved_bytes"] == 34 * GiB
    assert doc["device_used_bytes"] == 34 * GiB + 700 * MiB
    assert doc["external_bytes"] == 700 * MiB
    assert doc["device_total_bytes"] == 80 * GiB
    assert doc["device"] == {"index": 0, "name": "Fake H100 80GB", "total_bytes": 80 * GiB}
    assert (doc["rank"], doc["local_rank"], doc["world_size"]) == (3, 3, 8)
    assert doc["config_hash"] == plan.config_hash()
    assert doc["workload_hash"] == workload_hash(plan)
    assert doc["plan_name"] == "my plan"
    assert doc["window"]["steps_seen"] == 5
    assert doc["versions"]["torch"] == "9.9.9+fake"
    assert doc["versions"]["cuda"] == "12.8"
    assert doc["versions"]["nccl"] == "2.27.3"
    assert set(doc["memory_stats"]) == {"allocated_bytes.all.peak", "num_alloc_retries", "num_ooms"}
    record = parse_record(doc)
    assert record.max_allocated_bytes == 26 * GiB and record.notes == ()
    assert load_records(out) == [record]
    result = reconcile(estimate(plan), [record], workload_hash(plan))
    assert result.warnings == ()
    assert result.ranks[0].figure("allocated").measured == 26 * GiB


def test_probe_is_inert_after_writing(generated, fake_cuda: FakeCudaState) -> None:
    module, _, _, out = generated
    probe = module.MemPlanProbe(warmup_steps=0, window_steps=1, out_dir=str(out))
    assert fake_cuda.resets == [0]  # no warm-up: the window starts at construction
    fake_cuda.run_step(24 * GiB, 20 * GiB, 32 * GiB)
    first = probe.step()
    fake_cuda.run_step(50 * GiB, 20 * GiB, 60 * GiB)
    assert probe.step() == first and probe.steps_seen == 1
    assert json.loads(Path(first).read_text("utf-8"))["max_allocated_bytes"] == 24 * GiB


def test_user_breakdown_is_kept_and_checked(generated, fake_cuda: FakeCudaState) -> None:
    module, _, counter, out = generated
    path = _train(module, fake_cuda, counter, out, breakdown={"weights": 4 * GiB})[-1]
    assert json.loads(Path(path).read_text("utf-8"))["breakdown"] == {"weights": 4 * GiB}
    with pytest.raises(ValueError, match="non-negative integer"):
        module.MemPlanProbe(breakdown={"weights": -1})


def test_without_cuda_the_record_says_so(generated, monkeypatch: pytest.MonkeyPatch) -> None:
    module, _, _, out = generated
    sys.modules["torch"].cuda.is_available = lambda: False
    probe = module.MemPlanProbe(warmup_steps=0, window_steps=1, out_dir=str(out))
    record = parse_record(json.loads(Path(probe.step()).read_text("utf-8")))
    assert not record.measured
    assert record.max_reserved_bytes is None and record.external_bytes is None
    assert any("CUDA was not available" in n for n in record.notes)


def test_snippet_imports_only_the_standard_library_and_torch() -> None:
    """The drop-in module may import json, os, platform, time at the top; torch lazily
    (inside a function); argparse only for its own command line."""
    tree = ast.parse(template_text())
    top = {a.name for node in tree.body if isinstance(node, ast.Import) for a in node.names}
    assert top == {"json", "os", "platform", "time"}
    assert not any(isinstance(node, ast.ImportFrom) for node in ast.walk(tree))
    everywhere = {
        a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names
    }
    assert everywhere == {"json", "os", "platform", "time", "torch", "argparse"}


def test_generated_snippet_bakes_the_hashes_as_literals() -> None:
    plan = default_plan()
    text = probe_source(plan.config_hash(), workload_hash(plan), 'it\'s "quoted"')
    tree = ast.parse(text)
    consts = {
        t.id: ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    assert consts["PLAN_CONFIG_HASH"] == plan.config_hash()
    assert consts["PLAN_WORKLOAD_HASH"] == workload_hash(plan)
    assert consts["PLAN_NAME"] == 'it\'s "quoted"'


def test_standalone_selftest_needs_torch(tmp_path: Path) -> None:
    """Run as a script with no torch importable, the self-test explains and exits 2."""
    if importlib.util.find_spec("torch") is not None:
        pytest.skip("torch is installed here; the no-torch path cannot be exercised")
    path = tmp_path / "memplan_probe.py"
    path.write_text(template_text(), "utf-8")
    run = subprocess.run(
        [sys.executable, str(path), "--selftest", "--out-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 2
    assert "torch is not installed" in run.stdout
