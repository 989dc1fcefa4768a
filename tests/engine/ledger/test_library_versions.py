"""Library versions that change what is kept (engine/ledger/activations/library_versions.py):
bitsandbytes before 0.43.2 kept each 4-bit linear's input (bitsandbytes/autograd/
_functions.py ``MatMul4Bit.forward``: ``ctx.tensors = (A, B)``; 0.43.2: ``(None, B)``)."""

from __future__ import annotations

import pytest
from ledger_plans import SMOL

from engine.ledger.activations.library_versions import bnb_keeps_input, version_tuple
from engine.ledger.activations.stage_layers import stage_layers
from engine.plan import Plan, default_plan, with_values
from engine.stacks.defaults import resolved

QLORA_QV = {
    "model.preset": None,
    "model.name": "SmolLM-135M",
    **{f"model.architecture.{k}": v for k, v in SMOL.items()},
    "method.kind": "qlora",
    "method.lora.targets": ["q", "v"],
    "method.lora.adapter_dtype": "bf16",
    "method.precision.policy": "pure_16bit",
    "method.recompute.policy": "none",
    "batch.micro_batch": 1,
    "batch.seq_len": 1024,
}


def _plan(version: str, **extra: object) -> Plan:
    return resolved(
        with_values(default_plan(), {**QLORA_QV, "runtime.bitsandbytes_version": version, **extra})
    )


@pytest.mark.parametrize(
    ("text", "old"),
    [("0.42", True), ("0.43.1", True), ("0.43.2", False), ("0.45.0", False), ("1.0", False)],
)
def test_version_rule(text: str, old: bool) -> None:
    assert bnb_keeps_input(text) is old
    assert len(version_tuple(text)) == 3


def test_old_bitsandbytes_keeps_the_inputs_no_adapter_keeps() -> None:
    """SmolLM-135M (h 576, i 1536), QLoRA on q and v with bf16 adapters (which keep the
    normed input themselves), 1 × 1024 tokens. bnb 0.43.1 adds per layer the inputs
    nothing else keeps: gate/up's (post-attention norm output) 1024 × 576 × 2 B =
    1,179,648 and down's (the gate·up product) 1024 × 1536 × 2 B = 3,145,728 — 4,325,376 B
    (o's input is flash attention's output, kept already; k shares q's input)."""
    new, old = stage_layers(_plan("0.43.2"), 0), stage_layers(_plan("0.43.1"), 0)
    for k_new, k_old in zip(new.kinds, old.kinds, strict=True):
        assert k_old.bytes - k_new.bytes == 1024 * (576 + 1536) * 2
    assert old.plain_bytes - new.plain_bytes == 30 * 4_325_376


def test_lora_and_full_plans_ignore_the_bitsandbytes_version() -> None:
    for kind in ("lora", "full"):
        a = stage_layers(_plan("0.43.2", **{"method.kind": kind}), 0)
        b = stage_layers(_plan("0.41.0", **{"method.kind": kind}), 0)
        assert a == b
