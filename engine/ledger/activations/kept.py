"""Tensors a stage keeps for backward besides its layers' saved sets, as
:class:`~engine.ledger.activations.varying.Varying` parts (they scale with the
micro-batches in flight): autocast's 16-bit weight copies and the tensors saved once per
forward (rotary tables, checkpoint positions; the head's on the last stage).
:func:`~engine.ledger.activations.rows.in_flight_at` lists them after the layers'.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from engine.ledger.activations import hf
from engine.ledger.activations.geometry import (
    INT64,
    Geometry,
    geometry,
    terms_formula,
)
from engine.ledger.activations.schedule import InFlight
from engine.ledger.activations.sdpa_kernel import PADDING_MASK, attention_key
from engine.ledger.activations.stage_layers import final_norm_at
from engine.ledger.activations.traits import source_of, traits_of
from engine.ledger.activations.varying import Span, Varying, new_varying
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
    placed: Iterable[LocalTensor],
    c: int,
    gran: int,
    qlora: bool,
    tied: bool,
    q_head: bool = False,
) -> tuple[int, int]:
    """Autocast's 16-bit copies of linear weights, each kept by its matmul for backward.

    A 4-bit (QLoRA) linear has none: bitsandbytes' ``MatMul4Bit`` saves only the packed
    weight, which is resident anyway, and dequantizes it again in backward
    (bitsandbytes/autograd/_functions.py). Returns (bytes per decoder layer summed over
    the stage, lm_head bytes).
    """
    layers, head = 0, 0
    for t in placed:
        if t.tensor.kind != "weight" or (qlora and is_quantized(t.tensor, q_head)):
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
        plan.method.qlora.quantize_lm_head,
    )
    per_layer = per_layers // max(n_layers, 1)
    one = per_layer * n_plain + (head if last else 0)
    dtype = plan.method.precision.compute_dtype

    def span(fly: InFlight) -> Span:
        casts = fly.times(one)
        return casts, casts

    def row(fly: InFlight, bytes_: Span, live: frozenset[Moment]) -> Row:
        casts = bytes_[0]
        return make_row(
            id="hbm.activations.saved.weight_casts",
            state="activations",
            label="Autocast 16-bit weight copies kept for backward",
            location="hbm",
            kind="peak",
            group="activations",
            low=bytes_[0],
            high=bytes_[1],
            formula=lambda: (
                f"{n_plain} layers × {fmt_count(per_layer)} B"
                + (f" + lm_head {fmt_count(head)} B" if last else "")
                + f", × {fly.num}/{fly.den} in flight = {fmt_count(casts)} B"
            ),
            source="torch-autocast",
            phases=FORWARD_BACKWARD,
            moments=live,
            dtype=dtype,
        )

    return new_varying((span, row, True, moments_in(FORWARD_BACKWARD, UNTIL_LAYERS_FREE)))


def profile_source(plan: Plan) -> str:
    if plan.runtime.activation_profile == "megatron":
        return "korthikanti-2022"
    if plan.runtime.activation_profile == "torchtitan":
        selective = plan.method.recompute.policy in ("selective", "every_k")
        return "torchtitan-selective-ac" if selective else "torchtitan-llama3-model"
    return source_of(plan.model.architecture)


_ONCE_LABELS = {
    "other": "Saved once per forward (rotary cos / sin, positions)",
    "head": "Saved once per forward by the head (final norm, lm_head input, loss)",
}
_ONCE_IDS = {"other": "hbm.activations.saved.other", "head": "hbm.activations.saved.head"}


def once_at(
    plan: Plan, which: str, moments: frozenset[Moment]
) -> Callable[[list[tuple[Formula, int]]], Varying]:
    """Tensors saved once per micro-batch: ``other`` (rotary, checkpoint positions) stay
    until the layers' backward is done; ``head`` (final norm, lm_head input, soft-capped
    logits, the loss scalars) are freed by the first ops of backward. The plan read here,
    once."""
    source, label, id_ = profile_source(plan), _ONCE_LABELS[which], _ONCE_IDS[which]
    live = moments_in(FORWARD_BACKWARD, moments)

    def at(parts: list[tuple[Formula, int]]) -> Varying:
        total = sum([b for _, b in parts])

        def span(fly: InFlight) -> Span:
            n = -(-fly.num // fly.den) * total  # fly.whole, inlined
            return n, n

        def row(fly: InFlight, bytes_: Span, live: frozenset[Moment]) -> Row:
            whole = fly.whole
            return make_row(
                id=id_,
                state="activations",
                label=label,
                location="hbm",
                kind="peak",
                group="activations",
                low=bytes_[0],
                high=bytes_[1],
                formula=lambda: (
                    " + ".join(f"{text(k)} {fmt_count(b)}" for k, b in parts)
                    + f" = {fmt_count(total)} B × {whole} in flight"
                ),
                source=source,
                phases=FORWARD_BACKWARD,
                moments=live,
            )

        return new_varying((span, row, True, live))

    return at


def other_at(
    plan: Plan, ckpt: bool
) -> list[tuple[Formula, int]] | Callable[[Geometry], list[tuple[Formula, int]]]:
    """Tensors every layer's backward reads, saved once per micro-batch, at a
    micro-batch's geometry, the plan read here, once: all but
    Falcon's mask are one sequence's and worked out here too (at the geometry's local
    sequence, which the plan fixes) — the terms themselves when nothing scales with the
    micro-batch's size, else a function of its geometry."""
    arch = plan.model.architecture
    if plan.runtime.activation_profile != "hf-transformers":
        return []
    g0 = geometry(plan)  # its widths and local sequence: the micro-batch's size unread
    gran = g0.granularity
    fixed: list[tuple[Formula, int]] = []
    # torchtune's RoPE module indexes its own cache inside each layer (tune_rope): no
    # cos / sin computed once per forward and read by every layer
    if arch.position == "rotary" and plan.runtime.rope_cache != "torchtune":
        d = hf.rotary_dim(arch, g0)
        cs = round_up(g0.seq * d * g0.embed_bytes, gran)
        fixed.append((f"rotary cos, sin 2 × 1·{g0.seq}·{d}·{g0.embed_bytes}", 2 * cs))
    if ckpt:
        fixed.append(
            (f"position_ids kept by checkpoint 1·{g0.seq}·8", round_up(g0.seq * INT64, gran))
        )
    padded = attention_key(plan).endswith(PADDING_MASK)
    if not (ckpt and (traits_of(arch).explicit_mask or padded)):
        return fixed

    def at(g: Geometry) -> list[tuple[Formula, int]]:
        # FalconModel.forward (always) and create_causal_mask (with real padding,
        # sdpa_kernel.padding_mask) build one (b, 1, s, s) bool mask for every layer;
        # each checkpointed layer keeps it as an input to recompute from
        m = g.micro_batch * g.seq * g.seq
        mask = f"bool mask kept by checkpoint {g.micro_batch}·1·{g.seq}·{g.seq}"
        return [*fixed, (mask, round_up(m, gran))]

    return at


def head_at(plan: Plan) -> Callable[[Geometry], list[tuple[Formula, int]]]:
    """The last stage's head at a micro-batch's geometry, the plan read here, once: final
    norm and lm_head input, Gemma-2's soft-capped logits (``logits / cap`` → ``tanh``
    keeps its output, T × V), the loss scalars."""
    g0 = geometry(plan)  # its local sequence: the micro-batch's size unread
    fin, fin_bytes = final_norm_at(plan, g0.seq)
    megatron = plan.runtime.activation_profile == "megatron"
    softcap = not megatron and traits_of(plan.model.architecture).final_softcap
    scalars: tuple[Formula, int] = (
        f"loss scalars {SCALAR_ALLOCS} × {g0.granularity}",
        SCALAR_ALLOCS * g0.granularity,
    )

    def at(g: Geometry) -> list[tuple[Formula, int]]:
        out: list[tuple[Formula, int]] = [
            (lambda: f"final norm ({terms_formula(list(fin), g)})", fin_bytes(g.micro_batch))
        ]
        if softcap:
            v = ceil_div(g.vocab, g.tp)
            cap = round_up(g.tokens * v * g.compute_bytes, g.granularity)
            out.append((f"tanh of the soft-capped logits {g.tokens}·{v}·{g.compute_bytes}", cap))
        out.append(scalars)
        return out

    return at
