"""Logits and the cross-entropy loss on the last pipeline stage (``hbm.loss.*``).

With a large vocabulary this is often the single largest activation (memory-model §4;
transformers #30860). Hugging Face's causal-LM loss upcasts the logits to fp32 and
``log_softmax`` keeps its fp32 output for backward; during the loss's backward the
gradient of the log-probabilities and of the logits (both fp32) are live at once —
measured as 2·T·V·4 B of temporaries in every reference case. Under TP the logits are
vocab-parallel (÷ t) unless ``parallelism.tp_style`` gathers them to every rank
(transformers' ``lm_head: colwise_rep``) or never splits them (``replicated``).
``chunked`` runs the loss over chunks of tokens, recomputing each chunk's logits in
backward, so only one chunk's logits exist at a time; ``fused``
(a fused linear + cross-entropy kernel) computes the gradients during forward and keeps
the gradient of the lm_head input and weight instead of any logits. Which one runs is
``runtime.loss_impl`` (the stack's default); the compiled loss and torchtitan's chunked
loss are built in :mod:`~engine.ledger.activations.loss_modes`, torchtune's
chunked-output loss in :mod:`~engine.ledger.activations.loss_torchtune`.

Megatron's vocab-parallel cross-entropy (``megatron/core/tensor_parallel/
cross_entropy.py``) upcasts with ``.float()`` and turns that copy into the softmax in
place (``torch.exp(..., out=)``, ``div_``): the fp32 copy *is* the saved softmax, so the
forward adds only the 16-bit logits to it; its backward scales it in place
(``grad_input.mul_``) and autograd casts the result to the logits' 16-bit dtype (source
review R5). That cast is still live when the output layer's backward makes its input
gradient: Megatron-Core 0.16.1 ``tensor_parallel/layers.py``
``LinearWithGradAccumulationAndAsyncCommunication.backward`` runs
``grad_input = grad_output.matmul(weight)`` — T × h in the 16-bit dtype, the full
sequence under TP too (the column-parallel head's partial sums are all-reduced, or under
sequence parallelism reduce-scattered, only afterwards) — so the backward transient is
the cast plus T·h·2 B (measured by ``memplan trace`` of Megatron-Core: the traced
temporaries at the head's dgrad mm are 1,576,009,728 + 16,777,216 B at T 2048, h 4096).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from engine.ledger.activations.geometry import FP32, INT64, Geometry, geometry, trainability
from engine.ledger.activations.library_versions import version_tuple
from engine.ledger.activations.loss_kept import fixed_part, kept_bytes, kept_part, loss_row
from engine.ledger.activations.loss_modes import compiled_at, titan_chunked_at, titan_regather_at
from engine.ledger.activations.loss_torchtune import chunked_output_at
from engine.ledger.activations.schedule import InFlight
from engine.ledger.activations.varying import Span, Varying, built, new_varying
from engine.ledger.row import (
    AT_LOSS,
    BACKWARD,
    FORWARD,
    FORWARD_BACKWARD,
    Formula,
    Moment,
    Row,
    moments_in,
    span_row,
    text,
)
from engine.plan import Plan
from engine.sections.runtime import RuntimeSection
from engine.units import fmt_count, round_up


def logits_rows(plan: Plan, g: Geometry, fly: InFlight) -> list[Row]:
    """Saved log-probs, the forward transient and the loss-backward temporaries."""
    return built(logits_parts(plan, g), fly)


def logits_parts(plan: Plan, g: Geometry) -> list[Varying]:
    """:func:`logits_rows` as :class:`Varying` parts: only the saved log-probs scale with
    the micro-batches in flight; the transients are one micro-batch's."""
    return logits_at(plan)(g)


def logits_at(plan: Plan) -> Callable[[Geometry], list[Varying]]:
    """:func:`logits_parts` at a micro-batch's geometry, the plan read here, once (never
    for the micro-batch's shape, which only ``g`` gives)."""
    regather = titan_regather_at(plan)  # torchtitan's head unit under FSDP2
    base = _logits_at(plan)
    if regather is None:
        return base
    return lambda g: base(g) + regather(g)


def _logits_at(plan: Plan) -> Callable[[Geometry], list[Varying]]:
    rt = plan.runtime
    impl = rt.loss_impl  # resolved by the stack (never auto here)
    if impl == "compiled":
        return compiled_at(plan)
    if impl == "chunked_output":
        return chunked_output_at(plan)
    if impl == "chunked" and rt.activation_profile == "torchtitan":
        return titan_chunked_at(plan)
    legacy = _LEGACY_LOSS.get(impl, rt.loss)
    if legacy != rt.loss:  # the eager, chunked and fused rows below read runtime.loss
        rt = rt.model_copy(update={"loss": legacy})
    megatron = rt.activation_profile == "megatron"
    src = "megatron-cross-entropy" if megatron else "hf-causal-lm-loss"
    frozen_head = not trainability(plan).lm_head
    g0 = geometry(plan)  # widths and dtypes only: the micro-batch's size unread
    c = g0.compute_bytes
    lp_bytes = FP32 if (rt.logits_fp32_upcast or c == FP32) else c
    shifts = shifts_logits(rt)  # the runtime's, read once (not per micro-batch)
    return partial(_logits, rt, megatron, src, frozen_head, g0.logits_vocab, lp_bytes, shifts)


_LEGACY_LOSS = {
    "eager": "standard",
    "vocab_parallel": "standard",
    "chunked": "chunked",
    "fused": "fused",
}
"""``runtime.loss_impl`` → the ``runtime.loss`` whose rows :func:`_logits` builds."""


def _logits(
    rt: RuntimeSection,
    megatron: bool,
    src: str,
    frozen_head: bool,
    v: int,
    lp_bytes: int,
    shifts: bool,
    g: Geometry,
) -> list[Varying]:
    c, gran = g.compute_bytes, g.granularity
    t = g.micro_batch * g.seq

    def alloc(tokens: int, bpe: int) -> int:
        return round_up(tokens * v * bpe, gran)

    fwd_parts: list[tuple[Formula, int]]
    if rt.loss == "standard":
        tvb = t * v
        logits = -(-tvb * c // gran) * gran if gran > 1 else tvb * c  # alloc(t, c), inlined
        kept = 0 if megatron or rt.kept_logits == "none" else kept_bytes(rt, logits, alloc(t, FP32))
        if kept and rt.kept_logits == "fp32":  # the upcast is the kept output; the shift copies it
            shift = t - g.micro_batch
            fwd_parts = [(lambda: f"shifted fp32 copy {shift}·{v}·4", alloc(shift, FP32))]
        elif kept:  # the 16-bit logits are the kept output
            fwd_parts = (
                [(lambda: f"fp32 upcast {t}·{v}·4", alloc(t, FP32))] if lp_bytes != c else []
            )
        else:
            fwd_parts = [(lambda: f"logits {t}·{v}·{c}", logits)]
        if (
            lp_bytes != c and not megatron and not kept
        ):  # Megatron's upcast is the saved softmax (R5)
            fwd_parts.append((lambda: f"fp32 upcast {t}·{v}·4", alloc(t, FP32)))
        if shifts:
            ts = t - g.micro_batch
            fwd_parts.append(
                (lambda: f"shifted logits copy {ts}·{v}·{lp_bytes}", alloc(ts, lp_bytes))
            )
        if g.autocast:
            hid = round_up(t * g.hidden * FP32, gran)
            fwd_parts.append(
                (lambda: f"fp32 last hidden state held by the output {t}·{g.hidden}·4", hid)
            )
        elif not megatron and frozen_head:
            # A frozen lm_head saves nothing for backward, but the model output still
            # references the final norm's output until the loss is computed.
            hid = round_up(t * g.hidden * c, gran)
            fwd_parts.append(
                (lambda: f"last hidden state held by the output {t}·{g.hidden}·{c}", hid)
            )

        if g.micro_batch > 1 and rt.activation_profile == "hf-transformers":
            pad = round_up(g.micro_batch * (g.seq + 1) * INT64, gran)
            fwd_parts.append((lambda: f"padded labels {g.micro_batch}·{g.seq + 1}·8", pad))
        one = logits if lp_bytes == c else alloc(t, lp_bytes)
        dtensor = dtensor_loss_parallel(rt, g, lp_bytes)
        if dtensor:
            src = "torch-loss-parallel"
            fwd_parts.append((lambda: f"loss_parallel shifted logits {t}·{v}·4", one))
        n_bwd = 1 if megatron else 3 if dtensor else 2
        dgrad = round_up(t * g.hidden * c, gran) if megatron else 0  # the head's input grad
        bwd = logits + dgrad if megatron else n_bwd * one  # Megatron: the 16-bit cast + dgrad
        bwd_formula: Formula = (
            (lambda: f"{_BWD_WHAT[dtensor]} {n_bwd} × {t}·{v}·{lp_bytes} = {fmt_count(bwd)} B")
            if not megatron
            else (
                lambda: (
                    f"softmax grad computed in place; the 16-bit cast {t}·{v}·{c} + the "
                    f"output layer's input grad {t}·{g.hidden}·{c} = {fmt_count(bwd)} B"
                )
            )
        )

        def saved_span(fly: InFlight) -> Span:
            saved = -(-fly.num // fly.den) * one  # fly.whole, inlined
            return saved, saved

        def saved_row(fly: InFlight, span: Span, moments: frozenset[Moment]) -> Row:
            return loss_row(
                "hbm.loss.saved",
                f"Loss: {'fp32 ' if lp_bytes == FP32 else ''}log-probs kept for backward",
                span,
                lambda: f"{t}·{v}·{lp_bytes} = {fmt_count(one)} B × {fly.whole} in flight",
                src,
                FORWARD_BACKWARD,
                moments,
            )

        parts = [new_varying((saved_span, saved_row, True, _SAVED))]
        if kept:
            parts.append(kept_part(rt, kept, t, v, FP32 if rt.kept_logits == "fp32" else c, src))
    else:
        k = min(rt.loss_chunk_tokens, t)
        chunk = alloc(k, c) + (2 * alloc(k, FP32) if lp_bytes == FP32 else alloc(k, c))
        fwd_parts = [(f"one chunk: logits, fp32 copy, log-probs {k}·{v}", chunk)]  # seldom
        if rt.loss == "fused":
            kept = round_up(t * g.hidden * c, gran) + round_up(v * g.hidden * FP32, gran)

            def kept_span(fly: InFlight) -> Span:
                return fly.whole * kept, fly.whole * kept

            def kept_row(fly: InFlight, span: Span, moments: frozenset[Moment]) -> Row:
                return loss_row(
                    "hbm.loss.saved",
                    "Fused loss: grads of lm_head input and weight computed in forward",
                    span,
                    lambda: f"{t}·{g.hidden}·{c} + fp32 {v}·{g.hidden}·4 = {fmt_count(kept)} B",
                    "liger-fused-linear-ce",
                    FORWARD_BACKWARD,
                    moments,
                )

            parts = [new_varying((kept_span, kept_row, True, _SAVED))]
            bwd, bwd_formula = 0, "fused: the gradients already exist"
        else:
            parts = []
            bwd = chunk + alloc(k, FP32)
            bwd_formula = f"one chunk recomputed plus its fp32 grad = {fmt_count(bwd)} B"
    fwd = sum([n for _, n in fwd_parts])
    parts.append(
        fixed_part(
            fwd,
            _FORWARD,
            lambda span, moments: loss_row(
                "hbm.loss.forward_transient",
                "Loss: logits while the loss is computed",
                span,
                lambda: (
                    " + ".join(f"{text(k)} {fmt_count(n)}" for k, n in fwd_parts)
                    + f" = {fmt_count(fwd)} B"
                ),
                src,
                FORWARD,
                moments,
            ),
        )
    )
    if bwd:
        parts.append(
            fixed_part(
                bwd,
                _AT_LOSS,
                lambda span, moments: loss_row(
                    "hbm.loss.backward_transient",
                    "Loss backward: gradient of the logits",
                    span,
                    bwd_formula,
                    src,
                    BACKWARD,
                    moments,
                ),
            )
        )
    return parts


SHIFT_COPY_UNTIL = (4, 49, 0)
"""The first transformers release whose causal-LM loss pads the labels instead of
copying the shifted logits (#35646)."""


def shifts_logits(rt: RuntimeSection) -> bool:
    """Whether the hf-transformers loss copies the shifted logits: up to 4.48
    ``loss_utils.ForCausalLMLoss`` (and the models' own loss before 4.46) ran
    ``shift_logits = logits[..., :-1, :].contiguous()`` on the upcast logits, a copy of
    b·(s − 1)·V alive with the upcast and the log-probs while ``cross_entropy`` runs."""
    return rt.activation_profile == "hf-transformers" and (
        version_tuple(rt.transformers_version) < SHIFT_COPY_UNTIL
    )


def dtensor_loss_parallel(rt: RuntimeSection, g: Geometry, lp_bytes: int) -> bool:
    """Whether the eager loss runs as DTensor's ``loss_parallel`` (torchtitan under TP:
    ``train_context`` enters ``loss_parallel()`` unless ``training.disable_loss_parallel``,
    and ``apply_tp`` keeps the output layer's logits ``Shard(-1)``).

    ``torch/distributed/tensor/parallel/loss.py`` replaces the ops: ``_log_softmax``
    makes ``shifted = x - x_max`` and then ``result = shifted - logsumexp`` beside the
    fp32 input (one more fp32 T × V/t buffer in forward than ATen's in-place kernel);
    ``_nll_loss_and_log_softmax_backward`` returns ``(grad_input + torch.exp(x)) *
    grad_output`` with ``grad_input = torch.zeros_like(x)``: the saved log-probs, the
    zeros, the sum and the exp (then the product) are four fp32 buffers at once, where
    ATen's backward has three."""
    return (
        rt.activation_profile == "torchtitan"
        and g.tp > 1
        and not g.gathered_logits
        and lp_bytes == FP32
    )


_BWD_WHAT = {
    False: "grad of log-probs and of logits",
    True: "loss_parallel backward: zeros_like(log-probs), grad + exp(log-probs), product",
}


_FORWARD = moments_in(FORWARD)
_AT_LOSS = moments_in(BACKWARD, AT_LOSS)
_SAVED = moments_in(FORWARD_BACKWARD, AT_LOSS)
"""The parts' moments (what make_row gives their rows)."""


def labels_parts(plan: Plan, g: Geometry, last: bool) -> list[Varying]:
    """The shifted labels nll_loss keeps (Hugging Face's causal-LM loss, last stage), as
    :class:`Varying` parts.

    HF pads labels by one and slices; for b = 1 the slice is already contiguous and stays
    a view of the padded (1, s + 1) tensor. Freed once nll_loss's backward ran, so it is
    gone at the loss-backward peak.
    """
    if not last or plan.runtime.activation_profile != "hf-transformers":
        return []
    n = g.seq + 1 if g.micro_batch == 1 else g.micro_batch * g.seq
    one = round_up(n * INT64, g.granularity)

    def span(fly: InFlight) -> Span:
        lab = -(-fly.num // fly.den) * one  # fly.whole, inlined
        return lab, lab

    def row(fly: InFlight, lab: Span, moments: frozenset[Moment]) -> Row:
        return span_row(
            id="hbm.loss.labels",
            label="Shifted labels kept by nll_loss",
            state="loss",
            span=lab,
            moments=moments,
            formula=lambda: f"int64 {n}·8 = {fmt_count(lab[0])} B × {fly.whole} in flight",
            source="hf-causal-lm-loss",
            phases=FORWARD,
            group="activations",
        )

    return [new_varying((span, row, True, _FORWARD))]
