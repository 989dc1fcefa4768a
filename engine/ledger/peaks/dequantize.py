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

torchao's ``NF4Tensor`` (``method.qlora.nf4_impl = torchao``, torchtune's QLoRA;
torchao/dtypes/nf4tensor.py ``LinearNF4``): forward runs ``F.linear(input,
weight.to(input.dtype))`` and backward ``grad_output @ weight.to(grad_output.dtype)``;
``Tensor.to`` with a dtype always dequantizes (``function_to_dtype`` →
``get_original_weight``). Eager, ``get_original_weight`` keeps its locals until it
returns: two int64 index tensors of n/2 (8n B), the two table lookups and the two scaled
halves (n/2 each in the weight's dtype c) and their stack (n·c) — 8n + 3n·c B at the
stack (14n for bf16; the scalers' ``flatten`` copy, n/2·c, is freed before it). Under
``torch.compile`` (torchtune compiles each decoder layer, the LoRA linears inside) the
dequantization is pointwise and Inductor fuses it into one kernel: only the n·c weight
the matmul reads.

A 4-bit **lm_head** (``method.qlora.quantize_lm_head``: Lightning Fabric's
``BitsandbytesPrecision``, LitGPT) is the exception: it runs at the end of forward, on
every chunk of LitGPT's ``GPT.forward(lm_head_chunk_size=128)`` (litgpt/lora.py), and
again in each chunk's backward, while the layers' saved activations are all alive. The
same whole-weight dequantize-then-cast happens there (bitsandbytes 0.42
``MatMul4Bit.forward``: ``linear(A, dequantize_4bit(B, quant_state).to(A.dtype).t())``;
Lightning quantizes from fp16 — ``_Linear4bit.quantize``: ``weight.to(dtype=torch.half)``
— so its copy is 2 B + the 2 B cast). For a large vocabulary this is the largest
transient of the step (Gemma-2-9B: 256,000 × 3,584 × 4 B = 3.4 GiB).
"""

from __future__ import annotations

from engine.ledger.held import HeldTensor
from engine.ledger.precision import DTYPE_BYTES
from engine.ledger.row import AT_LOSS, BACKWARD, FORWARD_BACKWARD, IN_LAYERS, Row, make_row
from engine.sections.method import QloraSection
from engine.units import fmt_count, round_up

FP32_BYTES = 4


def dequantize_rows(
    held: list[HeldTensor], q: QloraSection, granularity: int, compiled: bool = False
) -> list[Row]:
    """The largest 4-bit weight dequantized for its backward matmul, on this rank, and a
    4-bit lm_head's at the loss (:func:`head_row`); ``compiled``: the layers run under
    torch.compile (read by torchao's NF4 only)."""
    quantized = [t for t in held if t.category == "quantized" and t.unit != "root"]
    heads = [t for t in held if t.category == "quantized" and t.unit == "root"]
    rows = [head_row(max(t.numel for t in heads), q, granularity)] if heads else []
    if not quantized:
        return rows
    largest = max(t.numel for t in quantized)
    if q.nf4_impl == "torchao":
        return [*rows, torchao_row(largest, q, granularity, compiled)]
    low, high = _span(largest, q, granularity)
    return [
        *rows,
        make_row(
            id="hbm.dequantized.nf4",
            label="4-bit weight dequantized for its backward matmul",
            state="gathered",
            location="hbm",
            kind="peak",
            group="gathered",
            low=low,
            high=high,
            formula=f"largest quantized weight {fmt_count(largest)} el. {_from(q)} = "
            f"{fmt_count(low)}–{fmt_count(high)} B, one linear at a time",
            source="bnb-matmul4bit",
            phases=BACKWARD,
            backward=IN_LAYERS,
        ),
    ]


def torchao_bytes(numel: int, c: int, granularity: int, compiled: bool) -> int:
    """Peak bytes of one torchao NF4 weight of ``numel`` elements dequantized to a
    ``c``-byte dtype (module doc): the fused copy compiled; eager, at the stack, the two
    int64 halves, two lookups, two scaled halves and the stacked weight."""
    if compiled:
        return round_up(numel * c, granularity)
    half = numel // 2
    eager = [half * 8] * 2 + [half * c] * 4 + [numel * c]
    return sum(round_up(b, granularity) for b in eager)


def torchao_row(numel: int, q: QloraSection, granularity: int, compiled: bool) -> Row:
    """torchao's ``linear_nf4`` dequantizing the largest NF4 weight for a layer's matmul."""
    c = DTYPE_BYTES[q.compute_dtype]
    n = torchao_bytes(numel, c, granularity, compiled)
    how = (
        f"{c} B (one fused kernel under torch.compile)"
        if compiled
        else f"(8 + 3 × {c}) B (eager get_original_weight: two int64 index halves, two "
        f"lookups, two scaled halves and their stack)"
    )
    return make_row(
        id="hbm.dequantized.nf4",
        label="4-bit weight dequantized for its backward matmul",
        state="gathered",
        location="hbm",
        kind="peak",
        group="gathered",
        low=n,
        high=n,
        formula=f"largest quantized weight {fmt_count(numel)} el. × {how} = "
        f"{fmt_count(n)} B, one linear at a time (torchao linear_nf4)",
        source="torchao-nf4",
        phases=BACKWARD,
        backward=IN_LAYERS,
    )


def _span(numel: int, q: QloraSection, granularity: int) -> tuple[int, int]:
    """(low, high) bytes of one dequantized weight of ``numel`` elements: in the compute
    dtype (quantized from it, ``.to`` copies nothing) up to fp32 plus the cast copy; one
    figure when ``method.qlora.quantized_from`` names the dtype (fp16 + its bf16 cast
    under Lightning's plugin)."""
    c = DTYPE_BYTES[q.compute_dtype]
    cast = round_up(numel * c, granularity)
    if q.quantized_from != "any":
        n = round_up(numel * DTYPE_BYTES[q.quantized_from], granularity)
        exact = n + (cast if q.quantized_from != q.compute_dtype else 0)
        return exact, exact
    return cast, round_up(numel * FP32_BYTES, granularity) + (cast if c != FP32_BYTES else 0)


def _from(q: QloraSection) -> str:
    """The formula's words for the dtype dequantize_4bit returns."""
    c = DTYPE_BYTES[q.compute_dtype]
    if q.quantized_from != "any":
        d = DTYPE_BYTES[q.quantized_from]
        cast = f" + its {c} B cast" if q.quantized_from != q.compute_dtype else ""
        return f"× {d} B (quantized from {q.quantized_from}){cast}"
    return (
        f"× {c} B (quantized from {q.compute_dtype}) up to × {FP32_BYTES} B (quantized from "
        f"fp32) + its {c} B cast"
    )


def head_row(numel: int, q: QloraSection, granularity: int) -> Row:
    """A 4-bit lm_head dequantized for each chunk's matmul: live at the end of forward
    (every layer's activations kept) and in the loss's backward."""
    low, high = _span(numel, q, granularity)
    return make_row(
        id="hbm.dequantized.lm_head",
        label="4-bit lm_head dequantized for its matmul (forward and backward)",
        state="gathered",
        location="hbm",
        kind="peak",
        group="gathered",
        low=low,
        high=high,
        formula=f"lm_head {fmt_count(numel)} el. {_from(q)} = {fmt_count(low)}–"
        f"{fmt_count(high)} B, once per chunk",
        source="bnb-matmul4bit",
        phases=FORWARD_BACKWARD,
        backward=AT_LOSS,
    )
