"""A 4-bit lm_head (``method.qlora.quantize_lm_head``), against hand counts.

Lightning Fabric's ``BitsandbytesPrecision`` (what LitGPT's ``--quantize bnb.nf4`` runs)
swaps every ``torch.nn.Linear`` built under ``fabric.init_module`` for its 4-bit class,
the output projection included (lightning/fabric/plugins/precision/bitsandbytes.py
``module_init_context``); transformers keeps lm_head in 16-bit
(``get_keys_to_not_convert``). bitsandbytes' ``MatMul4Bit`` dequantizes the whole weight
for every call (0.42 ``forward``: ``linear(A, dequantize_4bit(B).to(A.dtype).t())``;
``backward``: ``grad_output @ dequantize_4bit(B).to(grad_output.dtype)``), and LitGPT
calls lm_head once per 128-position chunk at the end of forward and again in each
chunk's backward — while every layer's saved activations are alive.
"""

from __future__ import annotations

from typing import Any

from ledger_plans import SMOL, make_plan, rows_of

from engine.estimate import estimate

UNTIED = {**SMOL, "tied_embeddings": False}
"""SmolLM-135M's shapes with its own lm_head (49,152 × 576 = 28,311,552 weights)."""


def _plan(**changes: Any) -> Any:
    return make_plan(
        model__architecture=UNTIED,
        method__kind="qlora",
        method__qlora__double_quant=False,
        method__qlora__upcast_non_quantized=False,
        method__precision__policy="pure_16bit",
        parallelism__strategy="ddp",
        parallelism__dp=1,
        runtime__allocation_granularity_bytes=1,
        **changes,
    )


def test_a_quantized_lm_head_is_nf4_not_16_bit() -> None:
    """The 30 layers' 7 projections are 106,168,320 weights (tests/engine/ledger/
    test_methods.py): packed 53,084,160 B, fp32 absmax 106,168,320 / 64 × 4 =
    6,635,520 B. A 4-bit lm_head adds 28,311,552 / 2 = 14,155,776 B packed and
    28,311,552 / 64 × 4 = 1,769,472 B of absmax (Lightning's ``_NF4Linear``:
    ``compress_statistics=False``), and leaves the frozen 16-bit rows: the embedding
    28,311,552 + 61 norms × 576 = 35,136 → 28,346,688 × 2 B = 56,693,376 B. Kept in
    16-bit it is frozen too: (28,346,688 + 28,311,552) × 2 B = 113,316,480 B."""
    head = rows_of(_plan(method__qlora__quantize_lm_head=True))
    assert head["hbm.weights.nf4"] == 53_084_160 + 14_155_776
    assert head["hbm.weights.nf4_constants"] == 6_635_520 + 1_769_472
    assert head["hbm.weights.frozen"] == 56_693_376
    kept = rows_of(_plan())
    assert kept["hbm.weights.nf4"] == 53_084_160
    assert kept["hbm.weights.nf4_constants"] == 6_635_520
    assert kept["hbm.weights.frozen"] == 113_316_480


def test_the_4_bit_lm_head_is_dequantized_at_the_loss() -> None:
    """The whole lm_head dequantized per chunk (engine/ledger/peaks/dequantize.py
    ``head_row``): 28,311,552 × 2 B = 56,623,104 B quantized from bf16 (``.to`` copies
    nothing), up to 28,311,552 × 4 B + the 2 B cast = 169,869,312 B quantized from fp32
    (Lightning quantizes from fp16: 2 + 2 B, inside). Live at the end of forward and in
    the loss's backward only; the layers' own row is still the largest in-layer weight,
    gate/up/down 1,536 × 576 = 884,736 × 2 B = 1,769,472 B at the low end."""
    rows = {r.id: r for r in estimate(_plan(method__qlora__quantize_lm_head=True)).rows}
    head = rows["hbm.dequantized.lm_head"]
    assert (head.low, head.high) == (56_623_104, 169_869_312)
    assert head.moments == frozenset({"forward", "backward.start"})
    assert rows["hbm.dequantized.nf4"].low == 1_769_472
    plain = {r.id for r in estimate(_plan()).rows}
    assert "hbm.dequantized.lm_head" not in plain


def test_the_dequantized_head_raises_the_forward_peak_by_its_bytes() -> None:
    """At the forward moment the 4-bit head trades its 16-bit copy (56,623,104 B) for
    the packed data and absmax (15,925,248 B) and adds the dequantized weight
    (56,623,104–169,869,312 B): the forward moment moves by exactly their sum."""
    on = estimate(_plan(method__qlora__quantize_lm_head=True)).heaviest.moments["forward"]
    off = estimate(_plan()).heaviest.moments["forward"]
    assert on.low - off.low == 15_925_248 - 56_623_104 + 56_623_104
    assert on.high - off.high == 15_925_248 - 56_623_104 + 169_869_312
