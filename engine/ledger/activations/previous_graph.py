"""The previous micro-batch's output and graph, kept through the next forward
(``runtime.previous_output_kept``, LitGPT's finetune loop).

LitGPT's ``fit`` (litgpt/finetune/lora.py, 2024) runs ``logits = model(input_ids,
lm_head_chunk_size=128)`` and never deletes ``logits``: the previous micro-batch's list
of 16-bit logit chunks, and the autograd graph its ``grad_fn`` references, live until
the next forward returns and the name is rebound. Backward released the graph's saved
tensors (``retain_graph=False``), but not what custom autograd functions keep as plain
``ctx`` attributes: bitsandbytes before 0.43.2 stores every 4-bit linear's 16-bit input
as ``ctx.tensors = (A, B)`` (bitsandbytes 0.42 autograd/_functions.py
``MatMul4Bit.forward``), so those inputs of the previous micro-batch stay too — for a
dense decoder layer the attention input, the attention output (o's input; SDPA's own
saved copy is gone), the MLP input and the MLP product (down's input), and the 4-bit
lm_head's input.

They are live through the whole next forward, up to the rebinding of ``logits``, and
freed before the loss runs. The ledger's forward moment stands at the loss: the held
logits, the loss's saved log-probs (and a 4-bit head's dequantized weight, its own row,
``peaks/dequantize.py``). Two moments of the next forward exceed it by this row:

- the model's last lm_head chunk: the old graph and the new 16-bit chunks, neither the
  held logits nor the log-probs (the dequantized head is live there too);
- with Lightning Fabric's fp32 output (``runtime.kept_logits = fp32``: ``_FabricModule.
  forward`` returns ``precision.convert_output(output)``), the end of that cast: the old
  graph, the new 16-bit chunks and their fp32 copies, no dequantized head.

The row is the larger excess, never below zero (a bf16 LoRA's: the cast's, 16-bit
chunks + fp32 copies + old fp32 logits against held logits + log-probs, T·V·c).
"""

from __future__ import annotations

from collections.abc import Callable

from engine.ledger.activations.geometry import FP32, Geometry
from engine.ledger.activations.hf import dense_width
from engine.ledger.activations.library_versions import bnb_keeps_input
from engine.ledger.activations.varying import Fixed, Span, new_fixed
from engine.ledger.row import FORWARD, Moment, Row, moments_in, span_row
from engine.plan import Plan
from engine.units import fmt_count, round_up

_FORWARD = moments_in(FORWARD)


def previous_graph_at(plan: Plan, last: bool) -> Callable[[Geometry, int], list[Fixed]] | None:
    """The row at a micro-batch's geometry for a stage of ``n_layers`` layers; None when
    the loop drops its output (every stack but LitGPT's)."""
    rt, method = plan.runtime, plan.method
    if not rt.previous_output_kept:
        return None
    arch = plan.model.architecture
    ctx_kept = (
        method.kind == "qlora" and bnb_keeps_input(rt.bitsandbytes_version) and arch.moe is None
    )
    head_quantized = method.kind == "qlora" and method.qlora.quantize_lm_head
    head_kept = ctx_kept and head_quantized
    chunked = rt.loss_impl == "chunked_output"
    fp32_out = rt.kept_logits == "fp32"  # Fabric casts the output to fp32
    upcast = rt.logits_fp32_upcast or fp32_out

    def at(g: Geometry, n_layers: int) -> list[Fixed]:
        c, gran, t = g.compute_bytes, g.granularity, g.tokens
        v = g.logits_vocab
        ob = FP32 if fp32_out else c
        head_low = round_up(v * g.hidden * c, gran) if head_quantized else 0
        kept: list[tuple[str, int]] = []
        if last:
            kept.append((f"logits {t}·{v}·{ob}", round_up(t * v * ob, gran)))
        if ctx_kept and n_layers:
            widths = (g.hidden, g.heads_local * g.v_dim, g.hidden, dense_width(arch, g.tp))
            one = sum(round_up(t * w * c, gran) for w in widths)
            text = " + ".join(f"{t}·{w}·{c}" for w in widths)
            kept.append((f"4-bit linears' inputs {n_layers} × ({text})", n_layers * one))
        if last and head_kept:
            kept.append((f"lm_head input {t}·{g.hidden}·{c}", round_up(t * g.hidden * c, gran)))
        old = sum(b for _, b in kept)
        lp = FP32 if upcast else c
        n, why = old, ""
        if last and chunked:
            # the forward moment stands at the loss: held logits and log-probs (and the
            # dequantized head, a row of its own); the model's last lm_head chunk holds
            # the 16-bit chunks and the old graph instead, and Fabric's cast (its end:
            # 16-bit and fp32 chunks both) the old graph but no dequantized head
            loss = round_up(t * v * ob, gran) + round_up(t * v * lp, gran)
            chunks = round_up(t * v * c, gran)
            n = old + chunks - loss
            why = f" + 16-bit chunks {t}·{v}·{c} − at the loss {t}·{v}·{ob} + {t}·{v}·{lp}"
            if fp32_out:
                cast = old + chunks + round_up(t * v * FP32, gran) - head_low - loss
                if cast > n:
                    n = cast
                    why += f" + fp32 copies {t}·{v}·4 − dequantized head {fmt_count(head_low)}"
        n = max(0, n)
        if not n:
            return []

        def words(span: Span, moments: frozenset[Moment]) -> Row:
            return span_row(
                id="hbm.activations.previous_step",
                label="Previous micro-batch's output and graph, kept through this forward",
                state="activations",
                span=span,
                moments=moments,
                formula=lambda: (
                    " + ".join(f"{k} = {fmt_count(b)}" for k, b in kept)
                    + f"{why} = {fmt_count(n)} B"
                ),
                source="litgpt-fit-previous-graph",
                phases=FORWARD,
            )

        return [new_fixed(((n, n), words, True, _FORWARD))]

    return at
