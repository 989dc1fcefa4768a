"""torchtune's chunked-output cross-entropy (``runtime.loss_impl = chunked_output``).

Why its own mode: torchtune's chunking is not torchtitan's (:mod:`loss_modes`) and not
a recomputing chunked loss. ``TransformerDecoder.chunked_output``
(torchtune/modules/transformer.py) runs lm_head on every chunk of the sequence in
forward and returns the list, so the 16-bit logits of *all* chunks, T·V·c, exist
together; ``CEWithChunkedOutputLoss.forward`` (torchtune/modules/loss/
ce_chunked_output_loss.py, 8 chunks, split along the sequence) then calls
``compute_cross_entropy`` — ``cross_entropy(logits.float(), labels)`` — one chunk at a
time, so only the fp32 work is chunked. The recipes drop their reference before
backward (``del logits``: "free logits otherwise it peaks backward memory",
recipes/full_finetune_single_device.py, lora_finetune_single_device.py).

**Compiled** (``compile: True``: torchtune/training/_compile.py ``compile_loss``
compiles ``compute_cross_entropy`` alone for this loss): as the compiled cross-entropy
(source ``torch-compiled-cross-entropy``), each chunk's graph keeps its 16-bit logits
and two fp32 per-row statistics for backward — T·V·c + 2·T·4 over the chunks, until the
loss's backward. In backward the autograd engine runs the chunks' loss nodes (created
after every lm_head call, so higher sequence numbers) before any lm_head backward: each
frees its saved chunk and leaves that chunk's 16-bit gradient, so logits and gradients
together stay T·V·c, plus the one gradient being written: k·V·c at the loss's backward,
at both ends. AOT Autograd's donated buffers (torch/_functorch/config.py
``donated_buffer``) do not apply to it: ``collect_fw_donated_buffer_idxs``
(torch/_functorch/_aot_autograd/graph_compile.py) donates only saved tensors whose
storage no forward input shares, and the saved 16-bit chunk *is* the graph's input
(compiled on torch 2.13 with Inductor: saved [logits bf16, labels, max, lse],
``bw_donated_idxs`` [2, 3] — the two fp32 statistics only), so the gradient cannot be
written into it; torchtune's own step traced on fake tensors peaks there
(tests/trace/tune_lora_step.py).

**Eager** (``compile: False``): ``.float()`` makes a k × V fp32 copy that
``log_softmax`` turns into its saved fp32 output; the copy goes, the log-probs stay:
T·V·4 over the chunks, kept until each chunk's backward. In forward the 16-bit logits of
every chunk (T·V·c, the list) and one chunk's fp32 copy (k·V·4) sit next to them. In
the loss's backward a chunk's gradients of the log-probs and of the copy (2·k·V·4) join
them; the 16-bit gradients of the chunks done take the place of their fp32 log-probs
(c ≤ 4 B), so the saved row bounds them.

**lm_head's backward** (either mode, when lm_head trains — a tied embedding in a full
fine-tune): it runs per chunk after every chunk's loss backward, last chunk first; the
chunks' weight gradients meet in the autograd engine's input buffer for the weight.
Each arrives as a view: ``F.linear`` on a 3-D chunk is ``matmul(x, weight.t())``, so the
gradient is ``mm_mat2_backward``'s ``grad.t().mm(x).t()`` passed through ``TBackward0``'s
``grad.t()`` (torch/csrc/autograd/FunctionsManual.cpp), and a view made in backward keeps
its base alive (``as_view`` records it even with grad mode off,
torch/csrc/autograd/VariableTypeUtils.h). ``InputBuffer::accumulate``
(torch/csrc/autograd/input_buffer.cpp) adds in place only into a tensor whose storage
it alone holds (``can_accumulate_inplace``: ``storage().use_count() == 1``), so the
first sum — the last chunk's product plus the one before it — is out of place:
3·V·h·c at once, while the logit gradients of the C − 2 chunks not yet done
((T − 2k)·V·c) wait; the sum is then a fresh tensor and the later chunks add into it
(2·V·h·c next to fewer gradients). The moment before it, the second chunk's product
being made, holds 2·V·h·c next to (T − k)·V·c: the larger of the two (the first sum
wherever h > k) is lm_head's moment. Measured on torch 2.13's CPU engine with the
profiler's allocation timeline: a replica of the chunked head (bf16, k = 128, h = 384,
V·h = 3 chunk gradients) peaks at 15.2 chunk gradients in backward, the out-of-place
sum's 15, not the in-place 13. The loss's backward row is the larger of the loss's own
moment and lm_head's, net of the saved row.

With ``runtime.logits_fp32_upcast`` off the
cross-entropy runs on the 16-bit chunk itself (LitGPT's ``chunked_cross_entropy``,
litgpt/utils.py, over ``GPT.forward``'s ``lm_head_chunk_size`` list): no fp32 copy, and
the log-probs and both gradients are c bytes an element.

With ``runtime.kept_logits = fp32`` the loop holds the model's output, cast to fp32,
through backward and the step: LitGPT's ``fit`` binds ``logits = model(...)`` (never
deleted) and Lightning Fabric's ``_FabricModule.forward`` returns
``precision.convert_output(output)``, which casts every floating tensor of the output to
the default dtype, fp32 (lightning/fabric/plugins/precision/half.py and bitsandbytes.py
``convert_output``): the list holds fp32 chunks (T·V·4, the 16-bit ones freed), the
cross-entropy runs on them (fp32 log-probs, no copy), and the list stays live.
"""

from __future__ import annotations

from collections.abc import Callable

from engine.ledger.activations.geometry import FP32, Geometry, geometry, trainability
from engine.ledger.activations.loss_kept import fixed_part, kept_part, loss_row
from engine.ledger.activations.schedule import InFlight
from engine.ledger.activations.varying import Span, Varying, new_varying
from engine.ledger.row import (
    AT_LOSS,
    BACKWARD,
    FORWARD,
    FORWARD_BACKWARD,
    Moment,
    Row,
    moments_in,
)
from engine.plan import Plan
from engine.units import ceil_div, fmt_count, round_up

TORCHTUNE_CHUNKS = 8
"""``CEWithChunkedOutputLoss(num_output_chunks=8)``'s default, the recipes' configs'."""

SOURCE = "torchtune-chunked-output-loss"
LITGPT_SOURCE = "litgpt-fit-previous-graph"
"""The loop holding Fabric's fp32 output (LitGPT's fit)."""

_FORWARD = moments_in(FORWARD)
_AT_LOSS = moments_in(BACKWARD, AT_LOSS)
_SAVED = moments_in(FORWARD_BACKWARD, AT_LOSS)


def chunk_tokens(g: Geometry) -> int:
    """Tokens of the largest chunk: ``tensor_split`` / ``chunk`` of the sequence dimension
    into 8, for each of the micro-batch's sequences."""
    return g.micro_batch * ceil_div(g.seq, TORCHTUNE_CHUNKS)


def lm_head_moment(logits: int, chunk: int, head: int, chunks: int) -> tuple[int, bool]:
    """Bytes of lm_head's backward moment over the chunks' 16-bit logit gradients
    (``logits`` in all, ``chunk`` the largest) and the weight's gradients (``head`` each),
    and whether it is the first out-of-place sum (module doc): that sum holds three
    weight gradients next to the C − 2 chunks not done; the product before it two, next
    to C − 1; one chunk sums nothing (its gradient and its one product)."""
    if chunks < 2:
        return logits + head, False
    second = logits - chunk + 2 * head
    first_sum = logits - 2 * chunk + 3 * head
    return max(second, first_sum), first_sum >= second


def chunked_output_at(plan: Plan) -> Callable[[Geometry], list[Varying]]:
    """torchtune's chunked-output loss rows at a micro-batch's geometry (module doc)."""
    v = geometry(plan).logits_vocab
    compiled = plan.workload.torch_compile
    upcast = plan.runtime.logits_fp32_upcast
    h = plan.model.architecture.hidden
    head_trains = trainability(plan).lm_head
    held = plan.runtime.kept_logits == "fp32"  # LitGPT: Fabric's fp32 output, held

    def at(g: Geometry) -> list[Varying]:
        c, gran, t = g.compute_bytes, g.granularity, g.tokens
        k = chunk_tokens(g)
        logits = round_up(t * v * c, gran)
        if compiled:
            one = logits + 2 * round_up(t * FP32, gran)
            saved_formula = f"16-bit logits {t}·{v}·{c} + fp32 max, lse 2 × {t}·4"
            saved_label = "Chunked-output loss (compiled): 16-bit logits of every chunk kept"
            fwd = 0
            bwd = round_up(k * v * c, gran)
            bwd_formula = (
                f"one chunk's 16-bit gradient {k}·{v}·{c} = {fmt_count(bwd)} B (out of place: "
                "the saved logits are the graph's input, never a donated buffer)"
            )
        else:
            lp = FP32 if upcast or held else c
            one = round_up(t * v * lp, gran)
            saved_formula = f"log-probs of every chunk {t}·{v}·{lp}"
            saved_label = "Chunked-output loss: log-probs of every chunk kept"
            copy = round_up(k * v * FP32, gran) if upcast and c != FP32 and not held else 0
            fwd = (round_up(t * v * FP32, gran) if held else logits) + copy
            bwd = 2 * round_up(k * v * lp, gran)
            bwd_formula = (
                f"a chunk's grads of log-probs and of its logits 2 × {k}·{v}·{lp} = "
                f"{fmt_count(bwd)} B"
            )

        # lm_head's backward, chunk by chunk after every chunk's loss backward: the chunks'
        # weight gradients meet in the autograd engine's input buffer for the weight while
        # the other chunks' 16-bit logit gradients are still there; the first sum is out
        # of place (the products arrive as views, module doc): 3 V × h next to C − 2
        # chunks' gradients, or the product before it, 2 V × h next to C − 1; the saved
        # row (logits or log-probs) stands for the gradients
        head = round_up(v * h * c, gran) if head_trains else 0
        chunks = ceil_div(g.seq, ceil_div(g.seq, TORCHTUNE_CHUNKS))
        moment, first = lm_head_moment(logits, round_up(k * v * c, gran), head, chunks)
        at_head = max(0, moment - one) if head else 0
        bwd_low = bwd  # compiled too: the saved chunk is an input, not donated (module doc)
        if at_head > bwd_low:
            bwd_low = at_head
        if at_head > bwd:
            ce_text = bwd_formula
            bwd = at_head
            if first:
                sum_text = (
                    f"first out-of-place sum 3 × weight gradient {v}·{h}·{c} + the "
                    f"gradients of the chunks not done {t - 2 * k}·{v}·{c}"
                )
            elif chunks > 1:
                sum_text = (
                    f"2 × weight gradient {v}·{h}·{c} + the other chunks' gradients {t - k}·{v}·{c}"
                )
            else:
                sum_text = f"weight gradient {v}·{h}·{c} + the one chunk's {t}·{v}·{c}"
            bwd_formula = (
                f"lm_head backward: {sum_text} − the saved row = {fmt_count(bwd)} B "
                f"(more than the loss's own: {ce_text})"
            )

        def span(fly: InFlight) -> Span:
            n = fly.whole * one
            return n, n

        def row(fly: InFlight, bytes_: Span, live: frozenset[Moment]) -> Row:
            return loss_row(
                "hbm.loss.output_chunks",
                saved_label,
                bytes_,
                lambda: f"{saved_formula} = {fmt_count(one)} B × {fly.whole} in flight",
                SOURCE,
                FORWARD_BACKWARD,
                live,
            )

        parts = [new_varying((span, row, True, _SAVED))]
        if fwd and held:
            parts.append(kept_part(plan.runtime, fwd, t, v, FP32, LITGPT_SOURCE))
        elif fwd:
            parts.append(
                fixed_part(
                    fwd,
                    _FORWARD,
                    lambda span, live: loss_row(
                        "hbm.loss.output_chunks_forward",
                        "Chunked-output loss: every chunk's 16-bit logits, one fp32 copy",
                        span,
                        lambda: (
                            f"{t}·{v}·{c}"
                            + (f" + fp32 copy {k}·{v}·4" if copy else "")
                            + f" = {fmt_count(fwd)} B"
                        ),
                        SOURCE,
                        FORWARD,
                        live,
                    ),
                )
            )
        bwd_span = (bwd_low, bwd)
        parts.append(
            new_varying(
                (
                    lambda fly: bwd_span,
                    lambda fly, span, live: loss_row(
                        "hbm.loss.output_chunks_backward",
                        "Chunked-output loss backward: one chunk's gradients",
                        span,
                        lambda: bwd_formula,
                        SOURCE,
                        BACKWARD,
                        live,
                    ),
                    True,
                    _AT_LOSS,
                )
            )
        )
        return parts

    return at
