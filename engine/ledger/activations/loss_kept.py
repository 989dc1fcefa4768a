"""The loss rows' fixed parts: a row of the same bytes whatever the micro-batches in
flight, and the logits a training loop keeps by holding the model's output
(``runtime.kept_logits``) — apart from :mod:`loss` so that module stays one job (the
loss's own buffers) — and :func:`loss_row`, the one shape of every loss mode's rows."""

from __future__ import annotations

from engine.ledger.activations.varying import Span, Varying, Words, new_varying
from engine.ledger.row import Formula, Moment, Phase, Row, moments_in, span_row
from engine.sections.runtime import RuntimeSection
from engine.units import fmt_count

KEPT_MOMENTS = moments_in(frozenset({"forward", "backward", "optimizer"}))


def kept_bytes(rt: RuntimeSection, logits: int, fp32: int) -> int:
    """Bytes of the logits a training loop keeps by holding the model output
    (``runtime.kept_logits``), 0 when it keeps none."""
    return {"none": 0, "fp32": fp32, "compute": logits}[rt.kept_logits]


def kept_part(rt: RuntimeSection, kept: int, t: int, v: int, bpe: int, src: str) -> Varying:
    """The model output's logits, held by the loop from the loss through backward and the
    optimizer step.

    Answer.AI's fsdp_qlora ``train.py`` (``fsdp_main``) binds ``output = model(...)``,
    calls ``loss.backward()`` and ``optimizer.step()``, and only then ``output = None``
    ("Delete the output so more memory frees up before the next forward pass"); under
    transformers <= 4.44 ``LlamaForCausalLM.forward`` returns ``logits = logits.float()``,
    so that output holds fp32 T × V bytes while the loss backward's log-probs and their
    gradients are live (HF Trainer's ``compute_loss`` returns the loss alone, so its
    output is freed before backward: ``none``)."""
    dtype = "fp32" if rt.kept_logits == "fp32" else "16-bit"

    def words(span: Span, moments: frozenset[Moment]) -> Row:
        return loss_row(
            "hbm.loss.kept_output",
            f"Loss: {dtype} logits the training loop's output keeps",
            span,
            lambda: (
                f"{t}·{v}·{bpe} = {fmt_count(kept)} B (runtime.kept_logits: the output is "
                "held until after the optimizer step)"
            ),
            src,
            frozenset({"forward", "backward", "optimizer"}),
            moments,
        )

    return fixed_part(kept, KEPT_MOMENTS, words)


def fixed_part(n: int, moments: frozenset[Moment], words: Words) -> Varying:
    """A row of one micro-batch's ``n`` bytes whatever the micro-batches in flight, as a
    :class:`Varying` (the same bytes at every :class:`InFlight`; its row built by
    ``words`` from this very span and ``moments`` when read)."""
    span = (n, n)
    return new_varying((lambda fly: span, lambda fly, got, live: words(got, live), True, moments))


def loss_row(
    id_: str,
    label: str,
    span: Span,
    formula: Formula,
    source: str,
    phases: frozenset[Phase],
    moments: frozenset[Moment],
) -> Row:
    """A loss row of a part's ``span`` bytes, live at the part's ``moments``."""
    return span_row(
        id=id_,
        label=label,
        state="loss",
        span=span,
        moments=moments,
        formula=formula,
        source=source,
        phases=phases,
        group="logits",
    )
