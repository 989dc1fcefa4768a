"""The loss implementations :mod:`~engine.ledger.activations.loss` does not build itself
(``runtime.loss_impl``): a compiled cross-entropy, and torchtitan's chunked loss.

**compiled** (``torch.compile`` of ``cross_entropy(pred.float(), labels)``, torchtitan's
``BaseLoss._maybe_compile`` when ``compile.components`` holds ``loss``): Inductor fuses
the upcast, ``log_softmax`` and ``nll_loss`` into row kernels, so no fp32 T × V tensor
exists. The partitioner keeps the 16-bit logits (the graph's input) and two fp32
per-row statistics (max, log-sum-exp) for backward; the backward kernel writes the
logits' gradient in the logits' dtype. Rows: the kept logits and statistics
(``hbm.loss.compiled_logits``, T·V·c + 2·T·4, until the loss's backward) and the
gradient (``hbm.loss.compiled_backward``, T·V·c, at the loss's backward).

**torchtitan chunked** (``torchtitan/components/loss.py`` ``ChunkedLossWrapper``, 8
chunks by default): the decoder's output is split into 8 chunks of k = T / 8 tokens; each
chunk runs lm_head, an eager cross-entropy and its own backward *inside the forward
phase*; the hidden-state gradient is written into an fp32 ``GradAccumulator`` (T × h)
that feeds the decoder's backward. Live at the loss, besides the saved activations:

- one chunk's logits and cross-entropy temporaries: its 16-bit logits, kept by the loop
  until the chunk's backward, and three fp32 k × V tensors in that backward (the saved
  log-probs, the gradient of the log-probs and of the upcast logits): k·V·(c + 12);
- the accumulator, T·h·4, until the decoder's backward has read it;
- under FSDP, lm_head's gradient accumulated unsharded in the fp32 reduce dtype across
  the chunks (``set_requires_gradient_sync(False)`` until the last; FSDP2
  ``FSDPParam.unsharded_accumulated_grad``), V·h·4 (V ÷ TP on each rank), and at the
  last chunk the reduce-scatter's fp32 input, V·h·4 more, next to that chunk's 16-bit
  weight gradient, V·h·c, which FSDP2 frees only after the reduce-scatter
  (``foreach_reduce`` copies it into the fp32 input), and the chunk's 16-bit logits
  gradient, k·V·c, which lm_head's backward still holds when its weight gradient's hook
  fires the scatter, and the chunk's hidden-state gradient, k·h·c: ``h_chunk`` is a
  leaf, so lm_head's input gradient lands in ``h_chunk.grad``, which the loop drops
  (``h_chunk.grad = None``) only after ``chunk_loss.backward()`` has returned, FSDP2's
  post-backward scatter included (the traced grid shows the five live together); in a
  later chunk's weight-gradient matmul its 16-bit gradient, V·h·c, is live next to the
  chunk's logits and their 16-bit gradient, 2·k·V·c, before FSDP adds it to the fp32 sum
  (``accumulate_unsharded_grad_if_needed``). The loop's row is the largest of the three
  moments. With more than one sequence in the micro-batch the loop also holds a copy
  of the hidden states, 8 × k·h·c: ``_chunk_local`` splits (b, s, h) along the sequence,
  a strided view once b > 1, and ``.contiguous()`` copies each chunk, which
  ``h_chunks`` keeps until the wrapper returns. (The scatter's V·h·4 ÷ N output is not
  here: the activation rows never read DP, which the layout search's floors rely on,
  :mod:`engine.layout.proofs.bound`; :mod:`engine.ledger.peaks.titan_units` counts it.)
"""

from __future__ import annotations

from collections.abc import Callable

from engine.ledger.activations.geometry import FP32, Geometry, geometry
from engine.ledger.activations.loss_kept import fixed_part, loss_row
from engine.ledger.activations.schedule import InFlight
from engine.ledger.activations.varying import Fixed, Span, Varying, new_fixed, new_varying
from engine.ledger.peaks.titan_units import (
    WORLD_ONE_REDUCE_COPIES,
    head_regather_terms,
    regathers_head,
    shards_one_rank,
)
from engine.ledger.placement import LocalTensor
from engine.ledger.row import (
    AT_LOSS,
    BACKWARD,
    FORWARD,
    FORWARD_BACKWARD,
    Moment,
    Row,
    moments_in,
    span_row,
)
from engine.plan import Plan
from engine.stacks.families import rule_of
from engine.units import ceil_div, fmt_count, round_up

TORCHTITAN_CHUNKS = 8
"""``ChunkedLossWrapper.Config.num_chunks``'s default (torchtitan components/loss.py)."""

CHUNK_BACKWARD_FP32 = 3
"""fp32 k × V tensors live in one chunk's cross-entropy backward: the saved log-probs,
the gradient of the log-probs (``nll_loss_backward``) and of the upcast logits
(``_log_softmax_backward_data``)."""

_FORWARD = moments_in(FORWARD)
_AT_LOSS = moments_in(BACKWARD, AT_LOSS)
_SAVED = moments_in(FORWARD_BACKWARD, AT_LOSS)


def compiled_at(plan: Plan) -> Callable[[Geometry], list[Varying]]:
    """The compiled cross-entropy's rows at a micro-batch's geometry (module docstring)."""
    v = geometry(plan).logits_vocab
    src = "torch-compiled-cross-entropy"

    def at(g: Geometry) -> list[Varying]:
        c, gran, t = g.compute_bytes, g.granularity, g.tokens
        logits = round_up(t * v * c, gran)
        stats = 2 * round_up(t * FP32, gran)
        one = logits + stats

        def span(fly: InFlight) -> Span:
            n = fly.whole * one
            return n, n

        def row(fly: InFlight, bytes_: Span, live: frozenset[Moment]) -> Row:
            return loss_row(
                "hbm.loss.compiled_logits",
                "Compiled loss: 16-bit logits and per-row max, log-sum-exp kept",
                bytes_,
                lambda: (
                    f"logits {t}·{v}·{c} + fp32 max, lse 2 × {t}·4 = {fmt_count(one)} B × "
                    f"{fly.whole} in flight"
                ),
                src,
                FORWARD_BACKWARD,
                live,
            )

        grad = logits
        return [
            new_varying((span, row, True, _SAVED)),
            fixed_part(
                grad,
                _AT_LOSS,
                lambda span, live: loss_row(
                    "hbm.loss.compiled_backward",
                    "Compiled loss backward: the logits' gradient (16-bit)",
                    span,
                    lambda: f"{t}·{v}·{c} = {fmt_count(grad)} B",
                    src,
                    BACKWARD,
                    live,
                ),
            ),
        ]

    return at


def titan_chunked_at(plan: Plan) -> Callable[[Geometry], list[Varying]]:
    """torchtitan's chunked loss rows at a micro-batch's geometry (module docstring)."""
    g0 = geometry(plan)
    v, h = g0.logits_vocab, plan.model.architecture.hidden
    fsdp = rule_of(plan.parallelism.strategy).fsdp
    src = "torchtitan-chunked-loss"

    def at(g: Geometry) -> list[Varying]:
        c, gran, t = g.compute_bytes, g.granularity, g.tokens
        k = ceil_div(t, TORCHTITAN_CHUNKS)
        chunk = round_up(k * v * c, gran) + CHUNK_BACKWARD_FP32 * round_up(k * v * FP32, gran)
        acc = round_up(t * h * FP32, gran)
        head_grad = round_up(v * h * FP32, gran) if fsdp else 0
        weight_mm = 2 * round_up(k * v * c, gran) + round_up(v * h * c, gran) if fsdp else 0
        h_grad = round_up(k * h * c, gran)  # the chunk's h_chunk.grad (module docstring)
        last = head_grad + round_up(v * h * c, gran) + round_up(k * v * c, gran) + h_grad
        last = last if fsdp else 0
        # micro-batch > 1: each (b, s/8, h) split is a strided view, so .contiguous() copies
        copies = TORCHTITAN_CHUNKS * h_grad if g.micro_batch > 1 else 0
        loop = max(chunk, last, weight_mm) + copies
        parts = [
            fixed_part(
                loop,
                _FORWARD,
                lambda span, live: loss_row(
                    "hbm.loss.chunk",
                    "Chunked loss: one chunk's logits and cross-entropy backward",
                    span,
                    lambda: (
                        f"max(chunk of {k} tokens {k}·{v}·{c} + "
                        f"{CHUNK_BACKWARD_FP32} × fp32 {k}·{v}·4 = {fmt_count(chunk)}"
                        + (
                            f", last chunk: lm_head reduce-scatter fp32 input {v}·{h}·4 + "
                            f"its 16-bit gradient {v}·{h}·{c} + the chunk's logits' "
                            f"gradient {k}·{v}·{c} + its input's gradient {k}·{h}·{c} = "
                            f"{fmt_count(last)}, weight-gradient matmul 2 × {k}·{v}·{c}"
                            f" + {v}·{h}·{c} = {fmt_count(weight_mm)}"
                            if fsdp
                            else ""
                        )
                        + ")"
                        + (
                            f" + the {TORCHTITAN_CHUNKS} contiguous chunk copies of the "
                            f"hidden states {TORCHTITAN_CHUNKS} × {k}·{h}·{c}"
                            if copies
                            else ""
                        )
                        + f" = {fmt_count(loop)} B"
                    ),
                    src,
                    FORWARD,
                    live,
                ),
            ),
            fixed_part(
                acc,
                _SAVED,
                lambda span, live: loss_row(
                    "hbm.loss.grad_accumulator",
                    "Chunked loss: fp32 hidden-state gradient accumulator",
                    span,
                    lambda: f"{t}·{h}·4 = {fmt_count(acc)} B",
                    src,
                    FORWARD_BACKWARD,
                    live,
                ),
            ),
        ]
        if fsdp:
            parts.append(
                fixed_part(
                    head_grad,
                    _FORWARD,
                    lambda span, live: loss_row(
                        "hbm.loss.lm_head_grad",
                        "Chunked loss: lm_head gradient accumulated unsharded (fp32)",
                        span,
                        lambda: f"{v}·{h}·4 = {fmt_count(head_grad)} B",
                        src,
                        FORWARD,
                        live,
                    ),
                )
            )
        return parts

    return at


def titan_regather_at(plan: Plan) -> Callable[[Geometry], list[Varying]] | None:
    """The head unit's second gather under torchtitan's FSDP2, the larger part of
    ``backward.start`` (None where it does not apply).

    FSDP2 runs the ``[norm, lm_head]`` unit's post-backward once lm_head's input
    gradient exists (``FSDPParamGroup.post_backward``: reshard, reduce-scatter), before
    ``norm``'s backward, whose pre-backward gathers the unit again: its all-gather
    output (one more 16-bit copy of the unit; the first is
    ``hbm.gathered.root``) lives next to the first scatter's fp32 input — the eager
    loss's (V·h + h)·4; the chunked loss scattered in forward — while the eager loss's
    own ``backward.start`` tensors (the fp32 log-probs and two fp32 T × V gradients,
    3·T·V·4) are gone. The step's ``backward.start`` is the larger of the two moments,
    so this row is what the second adds beyond the loss's: max(0, unit + scatter −
    loss). Read once per plan, sized per micro-batch; the unit is whole on every rank
    and the row reads no DP (at DP 1 too where torchtitan shards one rank; the extra
    fp32 copies of the world-1 reduce are :func:`titan_world_one_at`'s, which the
    layout floors never build). Under TP the unit is
    this rank's ⌈V ÷ TP⌉ lm_head rows (:func:`~engine.ledger.peaks.titan_units.
    head_regather_terms`); CP plans are left out."""
    if not regathers_head(plan):
        return None

    def at(g: Geometry) -> list[Varying]:
        unit, scatter, loss = head_regather_terms(plan, g)
        n = max(0, unit + scatter - loss)
        if not n:
            return []
        return [
            fixed_part(
                n,
                _AT_LOSS,
                lambda span, live: span_row(
                    id="hbm.gathered.head_regather",
                    label="Head unit gathered again for norm's backward (beyond the loss's)",
                    state="gathered",
                    span=span,
                    moments=live,
                    formula=f"max(0, all-gather {fmt_count(unit)} + scatter input "
                    f"{fmt_count(scatter)} − loss {fmt_count(loss)}) = {fmt_count(n)} B",
                    source="torchtitan-fsdp-units",
                    phases=BACKWARD,
                ),
            )
        ]

    return at


def titan_world_one_at(
    plan: Plan, placed: tuple[LocalTensor, ...]
) -> Callable[[Geometry], list[Fixed]] | None:
    """At one rank (torchtitan 0.3.0 shards it, :func:`~engine.ledger.peaks.titan_units.
    shards_one_rank`) the head unit's post-backward, right after lm_head's backward, holds
    :data:`~engine.ledger.peaks.titan_units.WORLD_ONE_REDUCE_COPIES` fp32 copies of its
    gradient (``foreach_reduce`` at world size 1) where a larger world holds the scatter
    input and the regathered unit (:func:`titan_regather_at`): this part is what the
    copies add beyond that, max(0, 3·copy − loss) − max(0, unit + copy − loss), eager loss
    only (the chunked loss reduces in forward). None elsewhere — and without placed
    tensors: the layout search's floors build the activation rows of DP 1 with none as a
    lower bound at every DP (:mod:`engine.layout.proofs.bound`), which this DP-1 part
    would break; the estimate places the head's tensors on the last stage."""
    par = plan.parallelism
    if par.dp != 1 or plan.runtime.loss_impl != "eager":
        return None
    if not (shards_one_rank(plan) and regathers_head(plan)):
        return None
    if not any(t.tensor.role == "lm_head" for t in placed):
        return None

    def at(g: Geometry) -> list[Fixed]:
        unit, one, loss = head_regather_terms(plan, g)
        copies = WORLD_ONE_REDUCE_COPIES * one
        n = max(0, copies - loss) - max(0, unit + one - loss)
        if n <= 0:
            return []

        def words(span: Span, live: frozenset[Moment]) -> Row:
            return span_row(
                id="hbm.buckets.head_reduce_world_one",
                label="Head unit's fp32 reduce copies at one rank (beyond its regather)",
                state="buckets",
                span=span,
                moments=live,
                formula=f"max(0, {WORLD_ONE_REDUCE_COPIES} fp32 copies {fmt_count(copies)} − "
                f"loss {fmt_count(loss)}) − max(0, all-gather {fmt_count(unit)} + scatter "
                f"input {fmt_count(one)} − loss) = {fmt_count(n)} B",
                source="torchtitan-fsdp-units",
                phases=BACKWARD,
            )

        return [new_fixed(((n, n), words, True, _AT_LOSS))]

    return at
