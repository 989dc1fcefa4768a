"""The previous micro-batch's output and graph kept through the next forward
(``runtime.previous_output_kept``: LitGPT's finetune ``fit``).

litgpt/finetune/lora.py ``fit`` rebinds ``logits = model(...)`` only when the next
forward returns; bitsandbytes 0.42 ``MatMul4Bit.forward`` keeps each 4-bit linear's
input as ``ctx.tensors`` (autograd/_functions.py), which backward does not release while
the graph lives. Plans: SmolLM's shapes with an untied head (hidden 576, 9 heads of 64,
intermediate 1,536, 30 layers, vocab 49,152), QLoRA on bf16, one sequence of 1,024
tokens, LitGPT's chunked-output loss without upcast; every tensor is a multiple of 512 B.
"""

from __future__ import annotations

from typing import Any

from ledger_plans import SMOL, make_plan

from engine.estimate import estimate

ROW = "hbm.activations.previous_step"


def _plan(**changes: Any) -> Any:
    base: dict[str, Any] = {
        "model__architecture": {**SMOL, "tied_embeddings": False},
        "method__kind": "qlora",
        "method__lora__targets": ["q", "v"],
        "method__lora__adapter_dtype": "bf16",
        "method__qlora__quantize_lm_head": True,
        "method__qlora__upcast_non_quantized": False,
        "method__precision__policy": "pure_16bit",
        "parallelism__strategy": "ddp",
        "parallelism__dp": 1,
        "batch__seq_len": 1024,
        "batch__micro_batch": 1,
        "method__recompute__policy": "none",
        "runtime__loss_impl": "chunked_output",
        "runtime__logits_fp32_upcast": False,
        "runtime__bitsandbytes_version": "0.42.0",
        "runtime__previous_output_kept": True,
        "runtime__activation_band": {"low": 1.0, "high": 1.0},
    }
    return make_plan(**{**base, **changes})


def _row(plan: Any) -> Any:
    return {r.id: r for r in estimate(plan).rows}.get(ROW)


def test_old_bitsandbytes_keeps_every_4bit_input_of_the_previous_micro_batch() -> None:
    """Kept: the old logits 1,024 · 49,152 · 2 = 100,663,296 B; per layer the attention
    input, o's input (9 · 64), the MLP input and down's input (1,536), 1,024 · (576 +
    576 + 576 + 1,536) · 2 = 6,684,672 B, × 30 = 200,540,160 B; lm_head's input
    1,024 · 576 · 2 = 1,179,648 B. Less the loss's log-probs the loss moment holds and
    the end of the forward does not, 1,024 · 49,152 · 2: 201,719,808 B, at the forward
    moment only — and the forward moment grows by exactly that."""
    row = _row(_plan())
    assert row.low == row.high == 100_663_296 + 200_540_160 + 1_179_648 - 100_663_296
    assert row.high == 201_719_808
    assert row.moments == frozenset({"forward"})
    on = estimate(_plan()).heaviest.moments["forward"]
    off = estimate(_plan(runtime__previous_output_kept=False)).heaviest.moments["forward"]
    assert on.low - off.low == on.high - off.high == 201_719_808


def test_without_kept_inputs_the_old_logits_only_stand_in_for_the_log_probs() -> None:
    """bitsandbytes 0.43.2 stores (None, B), and a bf16 LoRA has no 4-bit linear: only
    the old logits are kept, as large as the log-probs the loss moment holds (both
    1,024 · 49,152 · 2 B) — no row. With the fp32 upcast the log-probs are larger."""
    assert _row(_plan(runtime__bitsandbytes_version="0.43.2")) is None
    assert _row(_plan(method__kind="lora")) is None
    assert _row(_plan(runtime__logits_fp32_upcast=True, method__kind="lora")) is None


def test_a_loop_that_drops_its_output_keeps_nothing() -> None:
    """The default (every stack but LitGPT's): no row."""
    assert _row(_plan(runtime__previous_output_kept=False)) is None


def test_fabric_fp32_output_held_by_the_loop() -> None:
    """runtime.kept_logits fp32 under the chunked-output loss (Lightning Fabric's
    convert_output casts LitGPT's logit chunks to fp32; fit holds them): bf16 LoRA, the
    same SmolLM plan, t = 1,024 tokens, V = 49,152, t·V = 50,331,648, chunks of k = 128.
    Forward: the logits 4 B instead of 2 and the log-probs 4 B instead of 2: +4·t·V =
    201,326,592 B. Loss backward: log-probs +2·t·V, the held logits 4·t·V (freed before
    backward when not held), one chunk's two gradients 2·k·V·(4 − 2): +6·t·V + 4·128·V
    = 327,155,712 B. Optimizer step: the held logits, 4·t·V = 201,326,592 B."""
    lora = {"method__kind": "lora", "runtime__previous_output_kept": False}
    on = estimate(_plan(runtime__kept_logits="fp32", **lora)).heaviest.moments
    off = estimate(_plan(**lora)).heaviest.moments
    tv = 1024 * 49152
    assert on["forward"].high - off["forward"].high == 4 * tv == 201_326_592
    assert on["backward.start"].high - off["backward.start"].high == 6 * tv + 4 * 128 * 49152
    assert on["optimizer"].high - off["optimizer"].high == 4 * tv


def test_fabric_cast_moment_with_the_previous_output_held() -> None:
    """Fabric's fp32 output and the previous one both held (LitGPT), t·V = 50,331,648.
    The forward moment (the loss) holds the fp32 logits and fp32 log-probs, 8·t·V.
    bf16 LoRA: the last lm_head chunk holds the 16-bit chunks and the old fp32 logits,
    6·t·V (−2·t·V); the end of the cast the 16-bit chunks, their fp32 copies and the old
    fp32 logits, 10·t·V: the row is 2·t·V = 100,663,296 B.
    QLoRA: the old graph adds X = 200,540,160 + 1,179,648 = 201,719,808 B of 4-bit inputs;
    the last chunk: X − 2·t·V = 101,056,512; the cast: X + 2·t·V less the dequantized head
    the loss moment counts (49,152 · 576 · 2 = 56,623,104) = 245,760,000 B, the larger."""
    held = {"runtime__kept_logits": "fp32"}
    assert _row(_plan(method__kind="lora", **held)).high == 2 * 50_331_648
    assert _row(_plan(**held)).high == 201_719_808 + 100_663_296 - 56_623_104 == 245_760_000
