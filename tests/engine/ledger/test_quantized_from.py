"""``method.qlora.quantized_from``: the dtype bitsandbytes' ``dequantize_4bit`` returns.

bitsandbytes 0.42 ``MatMul4Bit`` (autograd/_functions.py) runs
``dequantize_4bit(B, quant_state).to(A.dtype)``: the weight in ``quant_state.dtype`` —
the dtype it was quantized from — then, when that is not the compute dtype, a copy in
it. Lightning Fabric's ``_Linear4bit.quantize`` quantizes ``weight.to(dtype=torch.half)``
(lightning/fabric/plugins/precision/bitsandbytes.py), so under LitGPT each dequantized
weight is fp16 plus its bf16 copy: 4 B an element, where an unknown source dtype spans
2 B (quantized from bf16) to 6 B (fp32 + the cast). SmolLM's shapes with an untied,
quantized head: lm_head 49,152 × 576 = 28,311,552 elements; the largest layer weight
1,536 × 576 = 884,736 (every figure below is a multiple of 512 B).
"""

from __future__ import annotations

from typing import Any

from ledger_plans import SMOL, make_plan

from engine.estimate import estimate


def _rows(**changes: Any) -> dict[str, Any]:
    plan = make_plan(
        **{
            "model__architecture": {**SMOL, "tied_embeddings": False},
            "method__kind": "qlora",
            "method__qlora__quantize_lm_head": True,
            "method__precision__policy": "pure_16bit",
            "parallelism__strategy": "ddp",
            "parallelism__dp": 1,
            **changes,
        }
    )
    return {r.id: (r.low, r.high) for r in estimate(plan).rows}


def test_fp16_source_is_one_figure_of_four_bytes() -> None:
    """fp16 + bf16 copy: lm_head 28,311,552 · (2 + 2) = 113,246,208 B; the layer weight
    884,736 · 4 = 3,538,944 B."""
    rows = _rows(method__qlora__quantized_from="fp16")
    assert rows["hbm.dequantized.lm_head"] == (113_246_208, 113_246_208)
    assert rows["hbm.dequantized.nf4"] == (3_538_944, 3_538_944)


def test_compute_dtype_source_needs_no_copy_and_any_keeps_the_band() -> None:
    """bf16 (the compute dtype): ``.to`` copies nothing, 28,311,552 · 2 = 56,623,104 B;
    fp32: 4 + 2 B = 169,869,312 B; any: from the first to the second."""
    assert _rows(method__qlora__quantized_from="bf16")["hbm.dequantized.lm_head"] == (
        56_623_104,
        56_623_104,
    )
    assert _rows(method__qlora__quantized_from="fp32")["hbm.dequantized.lm_head"] == (
        169_869_312,
        169_869_312,
    )
    assert _rows()["hbm.dequantized.lm_head"] == (56_623_104, 169_869_312)
