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
from typing import NamedTuple

from engine.ledger.activations.exchange import exchange_rows
from engine.ledger.activations.geometry import geometry
from engine.ledger.activations.inputs import input_parts
from engine.ledger.activations.kept import (
    casts_part,
    head_terms,
    once_part,
    other_terms,
    profile_source,
)
from engine.ledger.activations.loss import labels_parts
from engine.ledger.activations.packing import band_of, packing_formula
from engine.ledger.activations.schedule import InFlight, in_flight
from engine.ledger.activations.stage_layers import StageLayers, stage_layers
from engine.ledger.activations.varying import Fixed, Span, Varying, built, fixed_built, of_row
from engine.ledger.activations.working import working_parts
from engine.ledger.placement import LocalTensor
from engine.ledger.row import (
    AT_LOSS,
    FORWARD,
    FORWARD_BACKWARD,
    UNTIL_LAYERS_FREE,
    Formula,
    Row,
    make_row,
    moments_in,
)
from engine.plan import Plan
from engine.units import fmt_count, round_up


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


def fixed_rows(
    plan: Plan, sl: StageLayers, last: bool, placed: tuple[LocalTensor, ...]
) -> FixedRows:
    """:class:`FixedRows` of a stage of layers ``sl`` placing ``placed``."""
    return fixed_parts(plan, sl, last, placed).rows()


def fixed_parts(
    plan: Plan, sl: StageLayers, last: bool, placed: tuple[LocalTensor, ...]
) -> FixedParts:
    """:func:`fixed_rows` as :class:`FixedParts`."""
    g = geometry(plan)
    held = working_parts(plan, sl)
    if sl.n_layers:
        held += [of_row(r) for r in exchange_rows(plan, g, placed)]
    held += input_parts(plan, g, last)
    tail: list[Fixed] = []
    if plan.runtime.attention == "eager":
        mask = round_up(g.micro_batch * g.seq * g.seq * g.compute_bytes, g.granularity)
        tail.append(
            of_row(
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
        )
    return FixedParts(sl, held, tail)


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
        in_flight_parts(plan, sl, last, n_layers, placed),
        labels_parts(plan, geometry(plan), last),
    )


def in_flight_parts(
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
        one, band = sl.one_bytes, band_of(plan)

        def layer_span(fly: InFlight) -> Span:
            return band(-(-one * fly.num // fly.den))  # fly.times(one), inlined

        def layer_formula(fly: InFlight) -> Formula:
            total = fly.times(one)
            return lambda: (
                sl.describe(g)
                + f" = {fmt_count(one)} B; × {fly.num}/{fly.den} in flight ({fly.why}) = "
                f"{fmt_count(total)} B; × activation band" + packing_formula(plan)
            )

    label = f"Saved activations, {n_layers} decoder layers ({plan.runtime.activation_profile})"
    source, dtype = profile_source(plan), plan.method.precision.compute_dtype

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
        parts.append(casts_part(plan, g, placed, n_layers, n_plain, last))
    other = other_terms(plan, g, n_ckpt > 0)
    if other:
        parts.append(once_part(plan, other, "other", UNTIL_LAYERS_FREE))
    head_parts = head_terms(plan, g) if last else []
    if head_parts:
        parts.append(once_part(plan, head_parts, "head", AT_LOSS))
    return parts
