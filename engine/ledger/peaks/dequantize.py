"""QLoRA's dequantized weight in backward (``hbm.dequantized.nf4``).

bitsandbytes (0.50) bitsandbytes/autograd/_functions.py ``MatMul4Bit.backward``:
``grad_A = grad_output @ F.dequantize_4bit(B, ctx.state).to(grad_output.dtype)`` —
one whole weight materialised per 4-bit linear, freed when the matmul returns.
``dequantize_4bit`` returns the weight in ``quant_state.dtype``, the dtype it was
quantized from (functional.py ``quantize_4bit``: ``dtype=A.dtype``): 2 B when the model
was loaded in bf16 (transformers 5's ``dtype="auto"``), then ``.to`` copies nothing; 4 B
when it was loaded in fp32, plus the 2 B cast copy. The largest quantized weight decides
the peak. Forward (and a checkpointed layer's recomputation) takes the same
dequantize-then-linear path for more tokens than the fused kernel serves
(backends/cuda/ops.py ``gemm_4bit``), but never while the loss is live.
"""

from __future__ import annotations

from engine.ledger.held import HeldTensor
from engine.ledger.precision import DTYPE_BYTES
from engine.ledger.row import BACKWARD, IN_LAYERS, Row, make_row
from engine.sections.method import QloraSection
from engine.units import fmt_count, round_up

FP32_BYTES = 4


def dequantize_rows(held: list[HeldTensor], q: QloraSection, granularity: int) -> list[Row]:
    """The largest 4-bit weight dequantized for its backward matmul, on this rank."""
    quantized = [t for t in held if t.category == "quantized"]
    if not quantized:
        return []
    largest = max(t.numel for t in quantized)
    c = DTYPE_BYTES[q.compute_dtype]
    low = round_up(largest * c, granularity)
    high = round_up(largest * FP32_BYTES, granularity) + (low if c != FP32_BYTES else 0)
    return [
        make_row(
            id="hbm.dequantized.nf4",
            label="4-bit weight dequantized for its backward matmul",
            state="gathered",
            location="hbm",
            kind="peak",
            group="gathered",
            low=low,
            high=high,
            formula=f"largest quantized weight {fmt_count(largest)} el. × {c} B (quantized "
            f"from {q.compute_dtype}) up to × {FP32_BYTES} B (quantized from fp32) + its "
            f"{c} B cast = {fmt_count(low)}–{fmt_count(high)} B, one linear at a time",
            source="bnb-matmul4bit",
            phases=BACKWARD,
            backward=IN_LAYERS,
        )
    ]
