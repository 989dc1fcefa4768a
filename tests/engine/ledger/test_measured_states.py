"""Persistent rows against the measured PyTorch training steps, to the byte."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ledger_plans import make_plan

from engine.estimate import estimate
from engine.plan import Plan

CASES = Path(__file__).resolve().parents[4] / "shared" / "reference" / "measured" / "cases.jsonl"


def _cases() -> list[dict[str, Any]]:
    if not CASES.exists():
        return []
    return [json.loads(line) for line in CASES.read_text().splitlines() if line.strip()]


def _plan(case: dict[str, Any]) -> Plan:
    inp = case["inputs"]
    m = inp["model"]
    arch = {
        "family": "llama",
        "hidden": m["hidden"],
        "layers": m["layers"],
        "heads": m["heads"],
        "kv_heads": m["kv_heads"],
        "head_dim": m["head_dim"],
        "intermediate": m["intermediate"],
        "vocab": m["vocab"],
        "tied_embeddings": m["tied"],
    }
    policy = {
        "fp32": ("fp32", "fp32"),
        "bf16": ("pure_16bit", "bf16"),
        "bf16_mixed": ("autocast", "bf16"),
    }[inp["precision"]]
    changes: dict[str, Any] = {
        "model__architecture": arch,
        "method__kind": inp["method"],
        "method__precision__policy": policy[0],
        "method__precision__compute_dtype": policy[1],
        "parallelism__strategy": "fsdp2" if inp["fsdp"] else "ddp",
        "parallelism__dp": inp["world_size"],
        "batch__seq_len": inp["seq_len"],
        "batch__micro_batch": inp["micro_batch"],
    }
    if case["lora"]:
        lora = case["lora"]
        changes["method__lora__rank"] = lora["r"]
        changes["method__lora__alpha"] = lora["alpha"]
        changes["method__lora__targets"] = [t.removesuffix("_proj") for t in lora["targets"]]
    return make_plan(**changes)


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c["name"])
def test_params_grads_optimizer_match_measured(case: dict[str, Any]) -> None:
    """Measured with torch 2.13 MemTracker, rank 0, allocations rounded to 512 B:
    params, grads and AdamW state (moments + per-tensor step) must equal the rows
    exactly: weights rows = params, hbm.grads = grads, optimizer rows = state."""
    rows = {r.id: r.high for r in estimate(_plan(case)).rows if r.kind == "persistent"}
    states = case["model_states"]
    weights = sum(v for k, v in rows.items() if k.startswith("hbm.weights"))
    optimizer = sum(v for k, v in rows.items() if k.startswith("hbm.optimizer."))
    assert weights == states["params"]
    assert rows["hbm.grads"] == states["grads"]
    assert optimizer == states["optimizer_state"]


def test_cases_were_found() -> None:
    if not CASES.exists():
        pytest.skip("shared/reference/measured is not beside this checkout")
    assert len(_cases()) >= 10
