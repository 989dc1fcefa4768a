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

from collections.abc import Callable
from functools import partial
from typing import NamedTuple

from engine.ledger.activations.compiled import compile_formula, fused_at
from engine.ledger.activations.eager_mask import mask_part
from engine.ledger.activations.exchange import exchange_parts
from engine.ledger.activations.geometry import Geometry, geometry
from engine.ledger.activations.inputs import inputs_at
from engine.ledger.activations.kept import (
    casts_part,
    head_at,
    once_at,
    other_at,
    profile_source,
)
from engine.ledger.activations.loss import labels_parts, logits_at
from engine.ledger.activations.loss_modes import titan_world_one_at
from engine.ledger.activations.offload_activations import (
    at_loss,
    gpu_span,
    offloads,
    stash_offload,
    unpacked_parts,
)
from engine.ledger.activations.offload_activations import source_of as offload_source
from engine.ledger.activations.packing import band_of, packing_formula
from engine.ledger.activations.previous_graph import previous_graph_at
from engine.ledger.activations.remaining import remaining_parts
from engine.ledger.activations.schedule import InFlight, in_flight
from engine.ledger.activations.stage_layers import StageLayers, Walk, counted_at, stage_layers
from engine.ledger.activations.titan_buffers import rope_caches_at
from engine.ledger.activations.varying import (
    Fixed,
    Span,
    Varying,
    built,
    fixed_built,
    new_varying,
)
from engine.ledger.activations.working import working_at
from engine.ledger.placement import LocalTensor
from engine.ledger.row import (
    AT_LOSS,
    FORWARD_BACKWARD,
    THROUGH_LAYERS,
    UNTIL_LAYERS_FREE,
    Formula,
    Moment,
    Row,
    moments_in,
    span_row,
)
from engine.plan import Plan
from engine.units import fmt_count


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


class FixedParts(NamedTuple):
    """:class:`FixedRows` as :class:`Fixed` parts: their bytes worked out, their rows
    built when read (:meth:`rows`)."""

    layers: StageLayers
    held: list[Fixed]
    tail: list[Fixed]

    def rows(self) -> FixedRows:
        return FixedRows(self.layers, fixed_built(self.held), fixed_built(self.tail))


class MakeUp(NamedTuple):
    """A stage make-up's activation rows as functions of a micro-batch's geometry: its
    layers counted there, its fixed parts and its varying parts (the saved rows', the
    labels', the last stage's logits'). Made by :func:`make_up` from a plan read once —
    never for the micro-batch's size, which only the geometry gives — so a plan of any
    size evaluates them (:mod:`engine.ledger.stage_rows` caches one per plan without its
    micro-batch's size)."""

    layers: Callable[[Geometry], StageLayers]
    fixed: Callable[[Geometry, StageLayers], FixedParts]
    saved: Callable[[Geometry, StageLayers], list[Varying]]
    labels: Callable[[Geometry], list[Varying]]
    logits: Callable[[Geometry], list[Varying]] | None


def make_up(plan: Plan, walk: Walk, last: bool, placed: tuple[LocalTensor, ...]) -> MakeUp:
    """The :class:`MakeUp` of a stage whose layers walk as ``walk`` placing ``placed``."""
    g = geometry(plan)  # for its local sequence and widths only
    _, n_ckpt, n_layers, _ = walk
    return MakeUp(
        counted_at(plan, walk, g.seq),
        fixed_at(plan, last, placed),
        in_flight_at(plan, last, n_layers, n_ckpt, placed),
        partial(labels_parts, plan, last=last),
        logits_at(plan) if last else None,
    )


def fixed_rows(
    plan: Plan, sl: StageLayers, last: bool, placed: tuple[LocalTensor, ...]
) -> FixedRows:
    """:class:`FixedRows` of a stage of layers ``sl`` placing ``placed``."""
    return fixed_at(plan, last, placed)(geometry(plan), sl).rows()


def fixed_at(
    plan: Plan, last: bool, placed: tuple[LocalTensor, ...]
) -> Callable[[Geometry, StageLayers], FixedParts]:
    """:func:`fixed_rows` as :class:`FixedParts` at a micro-batch's geometry and its
    stage's layers counted there, the plan read here, once."""
    working, inputs = working_at(plan), inputs_at(plan, last)
    rope = rope_caches_at(plan)
    previous = previous_graph_at(plan, last)  # LitGPT's fit keeps the last logits
    par = plan.parallelism
    exchange = par.cp > 1 or par.ep > 1  # else exchange_parts has none
    world_one = titan_world_one_at(plan, placed)  # torchtitan's head reduce at one rank
    eager = plan.runtime.attention == "eager"
    family = plan.model.architecture.family

    def at(g: Geometry, sl: StageLayers) -> FixedParts:
        held = working(g, sl)
        if exchange and sl.n_layers:
            held += exchange_parts(plan, g, placed)
        held += inputs(g)
        if rope is not None:
            held += rope(g, sl.n_layers)
        if previous is not None:
            held += previous(g, sl.n_layers)
        if world_one is not None:
            held += world_one(g)
        masks = [mask_part(g, family, sl.n_ckpt > 0)] if eager else []
        return _new_fixed_parts((sl, held, masks))

    return at


_new_fixed_parts = partial(tuple.__new__, FixedParts)  # built in C


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
    g = geometry(plan)
    return (
        in_flight_at(plan, last, n_layers, sl.n_ckpt, placed)(g, sl),
        labels_parts(plan, g, last),
    )


_SAVED = moments_in(FORWARD_BACKWARD, UNTIL_LAYERS_FREE)
_HOST = moments_in(FORWARD_BACKWARD)


def in_flight_at(
    plan: Plan, last: bool, n_layers: int, n_ckpt: int, placed: tuple[LocalTensor, ...]
) -> Callable[[Geometry, StageLayers], list[Varying]]:
    """The rows that scale with the micro-batches in flight on a stage of ``n_layers``
    layers, ``n_ckpt`` of them
    checkpointed, at a micro-batch's geometry and its layers counted there: the plan
    read here, once (never for the micro-batch's size, which only ``g`` gives)."""
    g0 = geometry(plan)  # widths and dtypes only: autocast's casts do not scale
    n_plain = n_layers - n_ckpt
    offload, host_source = offloads(plan), offload_source(plan)
    stash = stash_offload(plan, n_layers, n_ckpt)  # torchtune's: inputs placed per moment
    kept = at_loss(plan, n_ckpt) if stash else None
    saved_moments = moments_in(FORWARD_BACKWARD, AT_LOSS) if stash else _SAVED
    band, packing = band_of(plan), packing_formula(plan)
    fused = fused_at(plan)  # torch.compile's fused intermediates (None: eager)
    label = f"Saved activations, {n_layers} decoder layers ({plan.runtime.activation_profile})"
    source, dtype = profile_source(plan), plan.method.precision.compute_dtype
    fixed: list[Varying] = []
    if g0.autocast and (n_plain or last):  # the head is outside every checkpoint
        fixed.append(casts_part(plan, g0, placed, n_layers, n_plain, last))
    # rotary cos / sin and checkpoint inputs are read by every layer's backward, the
    # first layer's too: live through the layers (item 6)
    other_of, once_other = other_at(plan, n_ckpt > 0), once_at(plan, "other", THROUGH_LAYERS)
    if not callable(other_of):  # the same tensors at every size: their part made here
        fixed += [once_other(other_of)] if other_of else []
    head_of, once_head = (head_at(plan), once_at(plan, "head", AT_LOSS)) if last else (None, None)

    def at(g: Geometry, sl: StageLayers) -> list[Varying]:
        parts: list[Varying] = []
        layer_span: Callable[[InFlight], Span]
        layer_formula: Callable[[InFlight], Formula]
        if offload:
            full_b, plain = sl.largest, sl.one
            gpu_low, gpu_high, gpu_why = gpu_span(sl, kept)
            gpu = (gpu_low, gpu_high)

            def host_span(fly: InFlight) -> Span:
                host = fly.times(plain)
                return host, host

            def host_row(fly: InFlight, span: Span, live: frozenset[Moment]) -> Row:
                host = span[0]
                return span_row(
                    id="host.activations.offloaded",
                    label="Activations offloaded to host",
                    state="activations",
                    span=span,
                    moments=live,
                    formula=lambda: (
                        f"{n_layers} layers' saved sets {fmt_count(plain)} B (largest "
                        f"{fmt_count(full_b)} B) × {fly.num}/{fly.den} in flight = "
                        f"{fmt_count(host)} B (pinned host buffers)"
                    ),
                    source=host_source,
                    phases=FORWARD_BACKWARD,
                    location="host",
                )

            parts.append(new_varying((host_span, host_row, False, _HOST)))

            def layer_span(fly: InFlight) -> Span:
                return gpu

            def layer_formula(fly: InFlight) -> Formula:
                return f"offload: {gpu_why}"
        elif fused is not None and (removed := fused(g, sl)):
            one = sl.one

            def layer_span(fly: InFlight) -> Span:
                n = -(-one * fly.num // fly.den)
                return band(n - (-(-removed * fly.num // fly.den)))[0], band(n)[1]

            def layer_formula(fly: InFlight) -> Formula:
                total = fly.times(one)
                return lambda: (
                    sl.describe(g)
                    + f" = {fmt_count(one)} B; × {fly.num}/{fly.den} in flight ({fly.why}) = "
                    f"{fmt_count(total)} B; × activation band"
                    + packing
                    + compile_formula(fly.times(removed))
                )
        else:
            one = sl.one

            def layer_span(fly: InFlight) -> Span:
                return band(-(-one * fly.num // fly.den))  # fly.times(one), inlined

            def layer_formula(fly: InFlight) -> Formula:
                total = fly.times(one)
                return lambda: (
                    sl.describe(g)
                    + f" = {fmt_count(one)} B; × {fly.num}/{fly.den} in flight ({fly.why}) = "
                    f"{fmt_count(total)} B; × activation band" + packing
                )

        def layer_row(fly: InFlight, span: Span, live: frozenset[Moment]) -> Row:
            return span_row(
                id="hbm.activations.saved.layers",
                label=label,
                state="activations",
                span=span,
                moments=live,
                formula=layer_formula(fly),
                source=source,
                phases=FORWARD_BACKWARD,
                dtype=dtype,
            )

        parts.append(new_varying((layer_span, layer_row, True, saved_moments)))
        if not offload:  # what is left once the layers' backward frees them (item 6)
            parts += remaining_parts(sl, compiled_band(band, g, sl, fused), source, dtype)
        elif stash:  # the inputs torchtune's unpack brings back, layer by layer
            parts += unpacked_parts(sl, dtype)
        parts += fixed
        if callable(other_of):
            other = other_of(g)
            if other:
                parts.append(once_other(other))
        if head_of is not None and once_head is not None:
            head = head_of(g)
            if head:
                parts.append(once_head(head))
        return parts

    return at


def compiled_band(
    band: Callable[[int], Span],
    g: Geometry,
    sl: StageLayers,
    fused: Callable[[Geometry, StageLayers], int] | None,
) -> Callable[[int], Span]:
    """The activation band of bytes that are saved sets of ``sl``'s layers: under
    torch.compile the low end loses the fused intermediates' share of a saved set (the
    same share :func:`in_flight_at` takes off the saved row), so the rows of what is left
    after some layers' backward scale as the saved row does."""
    removed = fused(g, sl) if fused is not None else 0
    one = sl.one
    if not removed or not one:
        return band

    def scaled(n: int) -> Span:
        return band(n - n * removed // one)[0], band(n)[1]

    return scaled
