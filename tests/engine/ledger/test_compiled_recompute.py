"""torch.compile under full recompute: the layer inputs kept are the same, but the layer
recomputed in backward keeps the *compiled* saved set while its backward runs.

torch.utils.checkpoint (non-reentrant) re-runs the layer's forward in backward, and the
forward it re-runs is the compiled one (torchtune's recipes compile each
TransformerSelfAttentionLayer, ``training.compile_model``, and wrap it for activation
checkpointing): AOT Autograd's ``min_cut_rematerialization_partition``
(torch/_functorch/partitioners.py) decides what that forward saves, so the fused
RMSNorm / SwiGLU intermediates of :mod:`engine.ledger.activations.compiled` are missing
from the recomputed set too. The working-set row (``hbm.activations.working.layer``)
counts the recomputed set: its low end loses one layer's fused bytes; its high end and
every other row keep the eager figures.
"""

from __future__ import annotations

from test_compiled import _plan

from engine.estimate import estimate
from engine.ledger.row import Row
from engine.plan import Plan

FULL = {"method.recompute.policy": "full"}


def _rows(plan: Plan) -> dict[str, Row]:
    return {r.id: r for r in estimate(plan).rows}


def test_recomputed_layer_loses_one_layers_fused_intermediates() -> None:
    """SmolLM-135M (h 576, i 1536), bf16 full fine-tune, b 2 × s 1024 = 2048 tokens. One
    layer's fused intermediates (test_compiled.py's derivation):
      2 norm sites × 576 × (4 − 2) B × 2048 = 4,718,592 (fp32 upcast → bf16 input)
      2 norm sites × 576 × 2 B × 2048       = 4,718,592 (normalised; the norms train)
      2 × 1536 × 2 B × 2048                 = 12,582,912 (act(gate), gate·up)
    = 22,020,096 B. The eager working set's low end is 0.98 × net; the compiled one's is
    0.98 × (net − 22,020,096)."""
    eager = _rows(_plan(**FULL))
    compiled = _rows(_plan(**FULL, **{"workload.torch_compile": True}))
    e, c = eager["hbm.activations.working.layer"], compiled["hbm.activations.working.layer"]
    net = -(-e.low * 100 // 98)  # the eager net the band's 0.98 was taken of
    assert int(net * 0.98) == e.low
    assert c.low == int((net - 22_020_096) * 0.98)
    assert c.high == e.high
    assert "22,020,096" in c.formula and "torch.compile" in c.formula
    for rid, row in eager.items():
        if rid != "hbm.activations.working.layer":
            assert (compiled[rid].low, compiled[rid].high) == (row.low, row.high), rid


def test_lora_recomputed_layer_keeps_its_frozen_norms_out() -> None:
    """LoRA freezes the norms (no normalised tensor kept eagerly): 4,718,592 + 12,582,912
    = 17,301,504 B come off the recomputed layer."""
    lora = {"method.kind": "lora", "method.lora.targets": ["q", "v", "gate", "up", "down"]}
    e = _rows(_plan(**FULL, **lora))["hbm.activations.working.layer"]
    c = _rows(_plan(**FULL, **lora, **{"workload.torch_compile": True}))[
        "hbm.activations.working.layer"
    ]
    net = -(-e.low * 100 // 98)
    assert c.low == int((net - 17_301_504) * 0.98)
    assert c.high == e.high
