"""Tensors a stage keeps for backward besides its layers' saved sets, as
:class:`~engine.ledger.activations.varying.Varying` parts (they scale with the
micro-batches in flight): autocast's 16-bit weight copies and the tensors saved once per
forward (rotary tables, checkpoint positions; the head's on the last stage).
:func:`~engine.ledger.activations.rows.in_flight_parts` lists them after the layers'.
"""

from __future__ import annotations

from collections.abc import Iterable

from engine.ledger.activations import hf
from engine.ledger.activations.geometry import (
    INT64,
    Geometry,
    terms_bytes,
    terms_formula,
)
from engine.ledger.activations.schedule import InFlight
from engine.ledger.activations.stage_layers import final_norm_terms
from engine.ledger.activations.traits import source_of, traits_of
from engine.ledger.activations.varying import Span, Varying
from engine.ledger.placement import LocalTensor
from engine.ledger.row import (
    FORWARD_BACKWARD,
    UNTIL_LAYERS_FREE,
    Formula,
    Moment,
    Row,
    make_row,
    moments_in,
    text,
)
from engine.ledger.states.quantized import is_quantized
from engine.plan import Plan
from engine.units import ceil_div, fmt_count, round_up

SCALAR_ALLOCS = 2
"""The loss and nll_loss's total_weight: two 0-d tensors, one 512-B block each."""

LINEAR_ROLES = frozenset({"q", "k", "v", "qkv", "o", "gate", "up", "gate_up", "down", "lm_head"})


def _weight_casts(
    placed: Iterable[LocalTensor], c: int, gran: int, qlora: bool, tied: bool
) -> tuple[int, int]:
    """Autocast's 16-bit copies of linear weights, each kept by its matmul for backward.

    A 4-bit (QLoRA) linear has none: bitsandbytes' ``MatMul4Bit`` saves only the packed
    weight, which is resident anyway, and dequantizes it again in backward
    (bitsandbytes/autograd/_functions.py). Returns (bytes per decoder layer summed over
    the stage, lm_head bytes).
    """
    layers, head = 0, 0
    for t in placed:
        if t.tensor.kind != "weight" or (qlora and is_quantized(t.tensor)):
            continue
        n = round_up(t.numel * c, gran) * t.count
        if t.tensor.role in LINEAR_ROLES and t.tensor.layer is not None:
            layers += n
        elif t.tensor.role == "lm_head" or (tied and t.tensor.role == "embedding"):
            head += n  # the lookup itself casts nothing; a tied head multiplies by it
    return layers, head


def casts_part(
    plan: Plan,
    g: Geometry,
    placed: tuple[LocalTensor, ...],
    n_layers: int,
    n_plain: int,
    last: bool,
) -> Varying:
    """Autocast's weight copies kept for backward (:func:`_weight_casts`)."""
    per_layers, head = _weight_casts(
        placed,
        g.compute_bytes,
        g.granularity,
        plan.method.kind == "qlora",
        plan.model.architecture.tied_embeddings,
    )
    per_layer = per_layers // max(n_layers, 1)
    one = per_layer * n_plain + (head if last else 0)
    dtype = plan.method.precision.compute_dtype

    def span(fly: InFlight) -> Span:
        casts = fly.times(one)
        return casts, casts

    def row(fly: InFlight) -> Row:
        casts = span(fly)[0]
        return make_row(
            id="hbm.activations.saved.weight_casts",
            state="activations",
            label="Autocast 16-bit weight copies kept for backward",
            location="hbm",
            kind="peak",
            group="activations",
            low=casts,
            high=casts,
            formula=lambda: (
                f"{n_plain} layers × {fmt_count(per_layer)} B"
                + (f" + lm_head {fmt_count(head)} B" if last else "")
                + f", × {fly.num}/{fly.den} in flight = {fmt_count(casts)} B"
            ),
            source="torch-autocast",
            phases=FORWARD_BACKWARD,
            backward=UNTIL_LAYERS_FREE,
            dtype=dtype,
        )

    return Varying(span, row, True, moments_in(FORWARD_BACKWARD, UNTIL_LAYERS_FREE))


def profile_source(plan: Plan) -> str:
    if plan.runtime.activation_profile == "megatron":
        return "korthikanti-2022"
    return source_of(plan.model.architecture)


_ONCE_LABELS = {
    "other": "Saved once per forward (rotary cos / sin, positions)",
    "head": "Saved once per forward by the head (final norm, lm_head input, loss)",
}
_ONCE_IDS = {"other": "hbm.activations.saved.other", "head": "hbm.activations.saved.head"}


def once_part(
    plan: Plan,
    parts: list[tuple[Formula, int]],
    which: str,
    moments: frozenset[Moment],
) -> Varying:
    """Tensors saved once per micro-batch: ``other`` (rotary, checkpoint positions) stay
    until the layers' backward is done; ``head`` (final norm, lm_head input, soft-capped
    logits, the loss scalars) are freed by the first ops of backward."""
    total = sum([b for _, b in parts])
    source = profile_source(plan)

    def span(fly: InFlight) -> Span:
        n = fly.whole * total
        return n, n

    def row(fly: InFlight) -> Row:
        whole = fly.whole
        return make_row(
            id=_ONCE_IDS[which],
            state="activations",
            label=_ONCE_LABELS[which],
            location="hbm",
            kind="peak",
            group="activations",
            low=whole * total,
            high=whole * total,
            formula=lambda: (
                " + ".join(f"{text(k)} {fmt_count(b)}" for k, b in parts)
                + f" = {fmt_count(total)} B × {whole} in flight"
            ),
            source=source,
            phases=FORWARD_BACKWARD,
            backward=moments,
        )

    return Varying(span, row, True, moments_in(FORWARD_BACKWARD, moments))


def other_terms(plan: Plan, g: Geometry, ckpt: bool) -> list[tuple[Formula, int]]:
    """Tensors every layer's backward reads, saved once per micro-batch."""
    arch, gran = plan.model.architecture, g.granularity
    out: list[tuple[Formula, int]] = []
    if plan.runtime.activation_profile != "hf-transformers":
        return out
    if arch.position == "rotary":
        d = hf.rotary_dim(arch, g)
        cs = round_up(g.seq * d * g.embed_bytes, gran)
        out.append((f"rotary cos, sin 2 × 1·{g.seq}·{d}·{g.embed_bytes}", 2 * cs))
    if ckpt:
        out.append((f"position_ids kept by checkpoint 1·{g.seq}·8", round_up(g.seq * INT64, gran)))
        if traits_of(arch).explicit_mask:
            # FalconModel.forward builds one (b, 1, s, s) bool mask for every layer;
            # each checkpointed layer keeps it as an input to recompute from
            m = g.micro_batch * g.seq * g.seq
            out.append(
                (
                    f"bool mask kept by checkpoint {g.micro_batch}·1·{g.seq}·{g.seq}",
                    round_up(m, gran),
                )
            )
    return out


def head_terms(plan: Plan, g: Geometry) -> list[tuple[Formula, int]]:
    """The last stage's head: final norm and lm_head input, Gemma-2's soft-capped
    logits (``logits / cap`` → ``tanh`` keeps its output, T × V), the loss scalars."""
    gran = g.granularity
    fin = list(final_norm_terms(plan, g))
    out: list[tuple[Formula, int]] = [
        (lambda: f"final norm ({terms_formula(fin, g)})", terms_bytes(fin, g))
    ]
    megatron = plan.runtime.activation_profile == "megatron"
    if not megatron and traits_of(plan.model.architecture).final_softcap:
        v = ceil_div(g.vocab, g.tp)
        cap = round_up(g.tokens * v * g.compute_bytes, gran)
        out.append((f"tanh of the soft-capped logits {g.tokens}·{v}·{g.compute_bytes}", cap))
    out.append((f"loss scalars {SCALAR_ALLOCS} × {gran}", SCALAR_ALLOCS * gran))
    return out
