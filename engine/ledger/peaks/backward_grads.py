"""Gradients made before the first layer's backward (``hbm.grads.before_first_layer``).

A gradient allocated per parameter (unsharded, or FSDP2's per-tensor shard) appears when
backward reaches that parameter: torch 2.13 torch/csrc/autograd/functions/
accumulate_grad.h ``AccumulateGrad`` after ``zero_grad(set_to_none=True)``; FSDP2's
sharded gradient after the unit's reduce-scatter. So at ``backward.end`` — the first
ops of the stage's first decoder layer's backward — that layer's gradients do not
exist yet (nor the embedding's, made after it; a tied embedding's head contribution
waits in autograd's input buffer, so it is counted). The persistent ``hbm.grads`` row is
therefore live from the optimizer step on, and this row holds the gradients already
made at ``backward.end``. Under gradient accumulation every earlier sum is live there
and ``hbm.grads`` covers the moment itself, so this row is not made.
"""

from __future__ import annotations

from functools import partial

from engine.ledger.held import HeldTensor, recounted
from engine.ledger.row import BACKWARD, Row, make_row
from engine.ledger.states.allocs import ShardContext
from engine.ledger.states.rows import grad_sized, grads_per_tensor, suffixed
from engine.plan import Plan

EMBEDDING = "model.embed_tokens.weight"
"""The untied input embedding: its gradient is made after every layer's."""


def _made_before_first_layer(plan: Plan, trainable: list[HeldTensor]) -> list[HeldTensor]:
    """Every trainable tensor but the stage's first decoder layer's (one copy of a
    folded tensor standing for ``count`` layers) and an untied embedding."""
    layers = [u for u in {t.unit for t in trainable} if u.startswith("layer.")]
    first = min(layers, key=lambda u: int(u.split(".")[1])) if layers else None
    tied = plan.model.architecture.tied_embeddings
    out: list[HeldTensor] = []
    for t in trainable:
        if t.unit == "root" and not tied and t.name == EMBEDDING:
            continue
        if t.unit != first:
            out.append(t)
        elif t.count > 1:
            out.append(recounted(t, t.count - 1))
    return out


def _made_by_last_layer(trainable: list[HeldTensor]) -> tuple[list[HeldTensor], int]:
    """The stage's last decoder layer's trainable tensors (one copy of a folded tensor)
    and the stage's number of decoder layers (a folded unit stands for ``count``)."""
    counts: dict[str, int] = {}
    for t in trainable:
        if t.unit.startswith("layer."):
            counts[t.unit] = max(counts.get(t.unit, 0), t.count)
    if not counts:
        return [], 0
    last = max(counts, key=lambda u: int(u.split(".")[1]))
    return [recounted(t, 1) for t in trainable if t.unit == last], sum(counts.values())


def middle_grad_rows(
    plan: Plan, held: list[HeldTensor], ctx: ShardContext, grads_in_hbm: bool
) -> list[Row]:
    """The gradient shards live at ``backward.middle`` — the second layer's backward, at
    the last layer's reduce-scatter (issue 35 item 6): the last decoder layer's, made by
    its reduce-scatter (FSDP2 ``_fsdp_collectives.py`` ``foreach_reduce`` writes each
    parameter's sharded ``grad``; DDP's per-tensor gradients likewise appear as backward
    reaches them: ``AccumulateGrad``). None where ``backward_grad_rows`` makes none
    (offloaded, flat or accumulated gradients), nor for stages of fewer than three
    layers (no middle moment)."""
    trainable = [t for t in held if t.trainable]
    if not trainable or not grads_in_hbm or not grads_per_tensor(ctx.rule):
        return []
    if plan.batch.grad_accum > 1:
        return []
    made, n_layers = _made_by_last_layer(trainable)
    if not made or n_layers < 3:
        return []
    n, formula, dtypes = grad_sized(made, ctx)
    return [
        make_row(
            id="hbm.grads.last_layer",
            label=f"Gradients of the last layer, made before the middle layers' ({dtypes})",
            state="grads",
            location="hbm",
            kind="peak",
            group="gradients",
            low=n,
            high=n,
            formula=partial(suffixed, formula, "; the stage's last decoder layer's"),
            source="torch-autograd-accumulate",
            phases=BACKWARD,
            backward=frozenset({"backward.middle"}),
            dtype=dtypes,
        )
    ]


def backward_grad_rows(
    plan: Plan, held: list[HeldTensor], ctx: ShardContext, grads_in_hbm: bool
) -> list[Row]:
    """The gradients live at ``backward.end`` and ``backward.middle``
    (:func:`middle_grad_rows`)."""
    return _end_grad_rows(plan, held, ctx, grads_in_hbm) + middle_grad_rows(
        plan, held, ctx, grads_in_hbm
    )


def _end_grad_rows(
    plan: Plan, held: list[HeldTensor], ctx: ShardContext, grads_in_hbm: bool
) -> list[Row]:
    """The gradients live at ``backward.end`` (none when they are offloaded, flat, or
    accumulated: then ``hbm.grads`` or its host row says it)."""
    trainable = [t for t in held if t.trainable]
    if not trainable or not grads_in_hbm or not grads_per_tensor(ctx.rule):
        return []
    if plan.batch.grad_accum > 1:
        return []
    made = _made_before_first_layer(plan, trainable)
    if not made:
        return []
    n, formula, dtypes = grad_sized(made, ctx)
    suffix = "; all but the first decoder layer's" + (
        "" if plan.model.architecture.tied_embeddings else " and the embedding's"
    )
    return [
        make_row(
            id="hbm.grads.before_first_layer",
            label=f"Gradients made before the first layer's backward ({dtypes})",
            state="grads",
            location="hbm",
            kind="peak",
            group="gradients",
            low=n,
            high=n,
            formula=partial(suffixed, formula, suffix),  # written when read
            source="torch-autograd-accumulate",
            phases=BACKWARD,
            backward=frozenset({"backward.end"}),
            dtype=dtypes,
        )
    ]
