"""Activation rows of one pipeline stage (``hbm.activations.*``, ``host.activations.*``):
saved tensors, recompute, the backward working set.

The implementation profile (``plan.runtime.activation_profile``) lists what one layer
saves per micro-batch; this module multiplies by the stage's layers under the recompute
policy and by the micro-batches the pipeline schedule keeps in flight
(:mod:`engine.ledger.activations.schedule`), and adds the once-per-forward tensors
(rotary tables, final norm, labels). Work is O(1) per stage: one layer is counted and
multiplied, never looped over tokens or layers. The batch itself is in
:mod:`~engine.ledger.activations.inputs`, the loss's tensors in
:mod:`~engine.ledger.activations.loss`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import NamedTuple

from engine.ledger.activations import hf
from engine.ledger.activations.exchange import exchange_rows
from engine.ledger.activations.geometry import (
    INT64,
    Geometry,
    geometry,
    terms_bytes,
    terms_formula,
)
from engine.ledger.activations.inputs import input_rows
from engine.ledger.activations.loss import labels_parts
from engine.ledger.activations.packing import activation_band, packing_formula
from engine.ledger.activations.schedule import InFlight, in_flight
from engine.ledger.activations.stage_layers import StageLayers, final_norm_terms, stage_layers
from engine.ledger.activations.traits import source_of, traits_of
from engine.ledger.activations.varying import Span, Varying, built
from engine.ledger.activations.working import working_rows
from engine.ledger.placement import LocalTensor
from engine.ledger.row import (
    AT_LOSS,
    FORWARD,
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


class FixedRows(NamedTuple):
    """A stage's activation rows that do not depend on the micro-batches in flight there
    (the backward working set, the CP / EP exchange buffers, the input batch and
    buffers; the eager mask after the loss's rows): the same for every stage of the same
    layers and placed tensors, so :mod:`engine.ledger.stage_rows` builds them once."""

    layers: StageLayers
    held: list[Row]
    tail: list[Row]

    def around(self, saved: list[Row], labels: list[Row]) -> list[Row]:
        """The stage's activation rows in the ledger's order, given its
        :func:`varying_rows`: saved activations, these rows' held part, the labels,
        their tail."""
        return [*saved, *self.held, *labels, *self.tail]


def fixed_rows(
    plan: Plan, sl: StageLayers, last: bool, placed: tuple[LocalTensor, ...]
) -> FixedRows:
    """:class:`FixedRows` of a stage of layers ``sl`` placing ``placed``."""
    g = geometry(plan)
    held = working_rows(plan, sl)
    if sl.n_layers:
        held += exchange_rows(plan, g, placed)
    held += input_rows(plan, g, last)
    tail: list[Row] = []
    if plan.runtime.attention == "eager":
        mask = round_up(g.micro_batch * g.seq * g.seq * g.compute_bytes, g.granularity)
        tail.append(
            make_row(
                id="hbm.activations.forward.mask",
                state="activations",
                label="Eager attention causal mask (b × 1 × s × s)",
                location="hbm",
                kind="peak",
                group="activations",
                low=mask,
                high=mask,
                formula=lambda: (
                    f"{g.micro_batch}·{g.seq}·{g.seq}·{g.compute_bytes} = {fmt_count(mask)} B"
                ),
                source="hf-transformers-llama",
                phases=FORWARD,
            )
        )
    return FixedRows(sl, held, tail)


def activation_rows(
    plan: Plan,
    stage: int,
    n_layers: int,
    placed: tuple[LocalTensor, ...],
) -> list[Row]:
    """Saved activations, the backward working set and once-per-forward tensors."""
    last = stage == plan.parallelism.pp - 1
    fixed = fixed_rows(plan, stage_layers(plan, stage), last, placed)
    return fixed.around(*varying_rows(plan, stage, n_layers, placed, fixed.layers))


def varying_rows(
    plan: Plan,
    stage: int,
    n_layers: int,
    placed: tuple[LocalTensor, ...],
    sl: StageLayers,
) -> tuple[list[Row], list[Row]]:
    """The stage's activation rows that scale with its micro-batches in flight: (the
    saved rows, which come first, and the labels, which follow :attr:`FixedRows.held`):
    all that differs between stages of one make-up, so a caller holding the
    :class:`FixedRows` (and their sums) builds only these per stage."""
    saved, labels = varying_parts(plan, sl, stage == plan.parallelism.pp - 1, n_layers, placed)
    fly = in_flight(plan, stage)
    return built(saved, fly), built(labels, fly)


def varying_parts(
    plan: Plan,
    sl: StageLayers,
    last: bool,
    n_layers: int,
    placed: tuple[LocalTensor, ...],
) -> tuple[list[Varying], list[Varying]]:
    """:func:`varying_rows` of a stage of this make-up as :class:`Varying` parts (the
    saved rows', the labels'): what does not depend on the stage's micro-batches in
    flight worked out here, once per make-up."""
    return (
        _in_flight_parts(plan, sl, last, n_layers, placed),
        labels_parts(plan, geometry(plan), last),
    )


def _in_flight_parts(
    plan: Plan,
    sl: StageLayers,
    last: bool,
    n_layers: int,
    placed: tuple[LocalTensor, ...],
) -> list[Varying]:
    """The rows that scale with the micro-batches in flight on the stage."""
    g = geometry(plan)
    policy = plan.method.recompute.policy
    full_b, n_ckpt, n_plain = sl.largest, sl.n_ckpt, sl.n_plain

    parts: list[Varying] = []
    layer_span: Callable[[InFlight], Span]
    layer_formula: Callable[[InFlight], Formula]
    if policy == "offload":
        plain = sl.plain_bytes
        gpu = (full_b, 2 * full_b)

        def host_span(fly: InFlight) -> Span:
            host = fly.times(plain)
            return host, host

        def host_row(fly: InFlight) -> Row:
            host = host_span(fly)[0]
            return make_row(
                id="host.activations.offloaded",
                label="Activations offloaded to host",
                state="activations",
                location="host",
                kind="peak",
                group="activations",
                low=host,
                high=host,
                formula=lambda: (
                    f"{n_layers} layers × {fmt_count(full_b)} B × "
                    f"{fly.num}/{fly.den} in flight = {fmt_count(host)} B (pinned host buffers)"
                ),
                source="torch-activation-offload",
                phases=FORWARD_BACKWARD,
            )

        parts.append(Varying(host_span, host_row, False, moments_in(FORWARD_BACKWARD)))

        def layer_span(fly: InFlight) -> Span:
            return gpu

        def layer_formula(fly: InFlight) -> Formula:
            return (
                f"offload: the layer being copied out and the next one, 1–2 × {fmt_count(full_b)} B"
            )
    else:
        one = sl.one_bytes

        def layer_span(fly: InFlight) -> Span:
            return activation_band(plan, fly.times(one))

        def layer_formula(fly: InFlight) -> Formula:
            total = fly.times(one)
            return lambda: (
                sl.describe(g)
                + f" = {fmt_count(one)} B; × {fly.num}/{fly.den} in flight ({fly.why}) = "
                f"{fmt_count(total)} B; × activation band" + packing_formula(plan)
            )

    label = f"Saved activations, {n_layers} decoder layers ({plan.runtime.activation_profile})"
    source, dtype = _profile_source(plan), plan.method.precision.compute_dtype

    def layer_row(fly: InFlight) -> Row:
        low, high = layer_span(fly)
        return make_row(
            id="hbm.activations.saved.layers",
            state="activations",
            label=label,
            location="hbm",
            kind="peak",
            group="activations",
            low=low,
            high=high,
            formula=layer_formula(fly),
            source=source,
            phases=FORWARD_BACKWARD,
            backward=UNTIL_LAYERS_FREE,
            dtype=dtype,
        )

    parts.append(
        Varying(layer_span, layer_row, True, moments_in(FORWARD_BACKWARD, UNTIL_LAYERS_FREE))
    )
    if g.autocast and (n_plain or last):  # the head is outside every checkpoint
        parts.append(_casts_part(plan, g, placed, n_layers, n_plain, last))
    other = _other_terms(plan, g, n_ckpt > 0)
    if other:
        parts.append(_once_part(plan, other, "other", UNTIL_LAYERS_FREE))
    head_parts = _head_terms(plan, g) if last else []
    if head_parts:
        parts.append(_once_part(plan, head_parts, "head", AT_LOSS))
    return parts


def _casts_part(
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


def _profile_source(plan: Plan) -> str:
    if plan.runtime.activation_profile == "megatron":
        return "korthikanti-2022"
    return source_of(plan.model.architecture)


_ONCE_LABELS = {
    "other": "Saved once per forward (rotary cos / sin, positions)",
    "head": "Saved once per forward by the head (final norm, lm_head input, loss)",
}
_ONCE_IDS = {"other": "hbm.activations.saved.other", "head": "hbm.activations.saved.head"}


def _once_part(
    plan: Plan,
    parts: list[tuple[Formula, int]],
    which: str,
    moments: frozenset[Moment],
) -> Varying:
    """Tensors saved once per micro-batch: ``other`` (rotary, checkpoint positions) stay
    until the layers' backward is done; ``head`` (final norm, lm_head input, soft-capped
    logits, the loss scalars) are freed by the first ops of backward."""
    total = sum(b for _, b in parts)
    source = _profile_source(plan)

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


def _other_terms(plan: Plan, g: Geometry, ckpt: bool) -> list[tuple[Formula, int]]:
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


def _head_terms(plan: Plan, g: Geometry) -> list[tuple[Formula, int]]:
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
