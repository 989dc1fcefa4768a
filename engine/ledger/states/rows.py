"""Persistent model states of one rank: weights, master copy, gradients, optimizer.

These live for the whole step. Each row is the rank's shard summed over its
allocations, each allocation rounded up to the allocator's granularity, because that
is what ``torch.cuda.memory_allocated`` reports (memory-model §1, measured cases).
"""

from __future__ import annotations

from functools import partial

from engine.ledger.held import HeldTensor
from engine.ledger.precision import DTYPE_BYTES, StateFormats
from engine.ledger.row import (
    ACCUMULATED_MOMENTS,
    ALL_PHASES,
    GRADIENT_MOMENTS,
    STEP_ACCUMULATED_MOMENTS,
    STEP_GRADIENT_MOMENTS,
    CheckpointPart,
    Formula,
    Moment,
    Row,
    make_row,
    moments_in,
    text,
)
from engine.ledger.states import one_pass
from engine.ledger.states.allocs import (
    ShardContext,
    state_sized,
)
from engine.ledger.states.optimizer_rows import optimizer_rows, optimizer_rows_of
from engine.ledger.states.stepped_grads import stepped_in_backward
from engine.sections.method import OptimizerSection
from engine.stacks.families import StrategyRule

_WEIGHTS: dict[str, tuple[str, str, CheckpointPart]] = {
    "model": ("hbm.weights", "Weights", "weights"),
    "frozen": ("hbm.weights.frozen", "Frozen weights", "weights"),
    "adapters": ("hbm.weights.adapters", "LoRA adapter weights", "adapters"),
}
"""Weight category → row id, label, and its part of a checkpoint."""

_CATEGORIES = tuple(_WEIGHTS)
"""The categories with a weights row, in the rows' order."""


def weight_rows(held: list[HeldTensor], ctx: ShardContext) -> list[Row]:
    """One weights row per category (trained, frozen, adapters)."""
    rows = []
    for category in _WEIGHTS:
        ts = [t for t in held if t.category == category]
        if ts:
            n, formula, dtypes = state_sized(
                ts, ctx.rule.params, ctx, "param_dtype", whole_if_persistent=True
            )
            rows.append(_weight_row(category, n, formula, dtypes, ctx))
    return rows


def _weight_row(category: str, n: int, formula: Formula, dtypes: str, ctx: ShardContext) -> Row:
    """The weights row of one category, its state sized (bytes, formula, dtypes)."""
    rid, label, part = _WEIGHTS[category]
    return make_row(
        id=rid,
        label=f"{label} ({dtypes})",
        state="weights",
        location="hbm",
        kind="persistent",
        group="weights",
        low=n,
        high=n,
        formula=formula,
        source=ctx.rule.source,
        dtype=dtypes,
        checkpoint=part,
    )


def master_row(trainable: list[HeldTensor], formats: StateFormats, ctx: ShardContext) -> Row:
    """The fp32 master copy that mixed precision keeps of trainable weights."""
    n, formula, dtypes = state_sized(
        trainable, ctx.rule.optimizer, ctx, "param_dtype", as_dtype="fp32"
    )
    return _master_row(n, formula, dtypes)


def _master_row(n: int, formula: Formula, dtypes: str) -> Row:
    """The master copy's row, its state sized (bytes, formula, dtypes)."""
    return make_row(
        id="hbm.master_weights",
        label="Master weights (fp32)",
        state="master",
        location="hbm",
        kind="persistent",
        group="optimizer",
        low=n,
        high=n,
        formula=formula,
        source="mixed-precision-master",
        dtype=dtypes,
        checkpoint="optimizer",
    )


def suffixed(formula: Formula, suffix: str) -> str:
    """``formula``'s text and then ``suffix`` (a lazy formula's, written when read)."""
    return text(formula) + suffix


def _grad_source(rule: StrategyRule, at_init: bool) -> str:
    if at_init:
        return "megatron-grad-buffer" if rule.family == "megatron" else "deepspeed-zero3-buffers"
    if rule.family == "fsdp1" and rule.shards_nothing:
        return "fsdp1-no-shard"  # all-reduced in place, no bucket copy
    return rule.source


def grads_per_tensor(rule: StrategyRule) -> bool:
    """Whether each gradient is its own allocation, made when backward reaches its
    parameter (unsharded, and FSDP2's per-tensor shards), and all of them exist only at
    the step — rather than one flat buffer (ZeRO-2, FSDP1), a buffer allocated at init
    (ZeRO-3, Megatron: :func:`grads_at_init`), or ZeRO-1's, all reduced at the end of
    backward into a partition (:func:`partitions_in_backward`)."""
    if grads_at_init(rule) or partitions_in_backward(rule):
        return False
    return not rule.grads or rule.chunking == "dim0"


def grads_at_init(rule: StrategyRule) -> bool:
    """Whether the gradient buffer is allocated when the model is wrapped and never
    freed, so it is live at every moment of the step.

    DeepSpeed 0.19.6 stage3.py ``_setup_for_real_optimizer`` allocates ZeRO-3's
    ``grad_partitions_flat_buffer`` at init. Megatron-Core
    ``megatron/core/distributed/param_and_grad_buffer.py``
    ``_ParamAndGradBuffer.__init__`` allocates ``grad_data = torch.zeros(numel,
    dtype=grad_dtype)`` when ``DistributedDataParallel`` wraps the model; every
    ``param.main_grad`` is a view of it and ``reset()`` only zeroes it between steps
    (source review R1)."""
    return rule.family == "megatron" or (rule.family == "deepspeed" and rule.params)


def grad_sized(trainable: list[HeldTensor], ctx: ShardContext) -> tuple[int, Formula, str]:
    """(bytes, formula, dtypes) of these tensors' gradients as the rank holds them, the
    formula written when first read."""
    return state_sized(trainable, ctx.rule.grads, ctx, "grad_dtype")


def grad_row(trainable: list[HeldTensor], ctx: ShardContext) -> Row:
    """The rank's gradients: produced during backward, summed across micro-batches.

    ZeRO-3 and Megatron-Core are the exceptions: their gradient buffer is allocated at
    init and never freed (:func:`grads_at_init`), so it is live at every moment."""
    n, formula, dtypes = grad_sized(trainable, ctx)
    return _grad_row(n, formula, dtypes, ctx)


def _grad_row(n: int, formula: Formula, dtypes: str, ctx: ShardContext) -> Row:
    """The gradients' row, their state sized (bytes, formula, dtypes)."""
    at_init = grads_at_init(ctx.rule)
    if at_init:
        what = "grad_data" if ctx.rule.family == "megatron" else "grad_partitions_flat_buffer"
        formula = partial(suffixed, formula, f" ({what}, allocated at init)")
        moments, accumulated = moments_in(ALL_PHASES), ACCUMULATED_MOMENTS
    elif partitions_in_backward(ctx.rule):  # the step sees the partition row instead
        moments, accumulated = AT_BACKWARD_END, ACCUMULATED_MOMENTS
    elif grads_per_tensor(ctx.rule):
        moments, accumulated = STEP_GRADIENT_MOMENTS, STEP_ACCUMULATED_MOMENTS
    else:
        moments, accumulated = GRADIENT_MOMENTS, ACCUMULATED_MOMENTS
    if ctx.no_sync and ctx.rule.grads and ctx.rule.fsdp:
        # FSDP's no_sync: no sharded gradient before the synced micro-batch's backward
        # (NO_ACCUMULATION); the unsharded ones are the accumulation row
        accumulated = NO_ACCUMULATION
    return make_row(
        id="hbm.grads",
        label=f"Gradients ({dtypes})",
        state="grads",
        location="hbm",
        kind="persistent",
        group="gradients",
        low=n,
        high=n,
        formula=formula,
        source=_grad_source(ctx.rule, at_init),
        moments=moments,
        accumulated_moments=accumulated,
        dtype=dtypes,
    )


NO_ACCUMULATION: frozenset[Moment] = frozenset()
"""FSDP1 ``_runtime_utils._post_backward_hook`` returns before ``_reduce_grad`` while
``not state._sync_gradients`` (inside ``FullyShardedDataParallel.no_sync``), keeping the
unsharded ``.grad``, and ``_post_backward_final_callback`` leaves it for the next
micro-batch; FSDP2's ``set_requires_gradient_sync(False)`` skips ``foreach_reduce`` the
same way: under ``accumulate_without_sync`` the sharded gradients exist only from the
last micro-batch's backward on (not across micro-batches)."""

AT_BACKWARD_END: frozenset[Moment] = frozenset({"backward.end"})
AT_STEP: frozenset[Moment] = frozenset({"optimizer"})


def partitions_in_backward(rule: StrategyRule) -> bool:
    """ZeRO-1: the full gradients exist until the accumulation boundary's reduce, which
    runs inside ``engine.backward`` and leaves only the rank's partition for the step.

    DeepSpeed 0.19.6 ``runtime/engine.py`` ``allreduce_gradients`` calls the optimizer's
    ``reduce_gradients`` at the boundary; ``stage_1_and_2.py``
    ``reduce_independent_p_g_buckets_and_remove_grads`` copies each gradient into the IPG
    bucket and re-points ``param.grad`` at the bucket (the full gradient's storage is
    freed), ``reduce_ipg_grads`` → ``copy_grads_in_partition`` keeps the in-partition
    part in ``grads_in_partition`` (2·P/N) and the epilogue
    (``independent_gradient_partition_epilogue``) drops every ``param.grad``: ``step``
    sees 2·P/N gradients (source review R4)."""
    return rule.family == "deepspeed" and rule.zero_stage == 1


def grad_partition_row(trainable: list[HeldTensor], ctx: ShardContext) -> Row:
    """ZeRO-1's gradient partition (``grads_in_partition``), live at the step: made by
    the reduce at the end of backward, freed after the step (:func:`partitions_in_backward`).
    A peak, not a state: nothing keeps it between steps, and ZeRO-Offload puts it on the
    host (its fp32 partition) instead."""
    n, formula, dtypes = state_sized(trainable, True, ctx, "grad_dtype")
    return make_row(
        id="hbm.grads.partition",
        label=f"ZeRO-1 gradient partition ({dtypes})",
        state="grads",
        location="hbm",
        kind="peak",
        group="gradients",
        low=n,
        high=n,
        formula=partial(suffixed, formula, " (grads_in_partition, reduced inside backward)"),
        source="deepspeed-zero1-partition",
        moments=AT_STEP,
        dtype=dtypes,
    )


SHARD_MOMENTS: frozenset[Moment] = frozenset({"optimizer", "checkpoint"})
"""From the optimizer step to the next step's ``zero_grad`` (a checkpoint saved after
the step sees it)."""


def main_grad_shard_row(trainable: list[HeldTensor], ctx: ShardContext) -> Row:
    """Megatron's distributed optimizer with 16-bit grads copies its shard of the main
    grads to fp32 for the step (the 20 → 4 + 16/d row of its table). Not checkpointed.

    Made at the step and freed at the next step's start: Megatron-Core
    ``megatron/core/optimizer/distrib_optimizer.py``
    ``_copy_model_grads_to_main_grads`` sets ``shard_main_param.grad =
    shard_model_grad.float()`` in ``step``, and ``zero_grad(set_to_none=True)`` at the
    start of the next ``train_step`` drops it (issue 35 item 9). With
    ``--use-precision-aware-optimizer`` the optimizer reads the 16-bit grad as
    ``decoupled_grad`` and the copy never exists (:func:`has_main_grad_shard`)."""
    n, formula, dtypes = state_sized(trainable, True, ctx, "grad_dtype", as_dtype="fp32")
    return make_row(
        id="hbm.optimizer.fp32_grad_shard",
        label="Optimizer: fp32 main-grad shard",
        state="optimizer",
        location="hbm",
        kind="peak",
        group="optimizer",
        low=n,
        high=n,
        formula=formula,
        source="megatron-main-grad-shard",
        moments=SHARD_MOMENTS,
        dtype=dtypes,
    )


def has_main_grad_shard(
    trainable: list[HeldTensor], formats: StateFormats, ctx: ShardContext, aware: bool
) -> bool:
    """Whether Megatron's step makes an fp32 copy of the main-grad shard: 16-bit grads
    (``.float()`` of fp32 ones is the same tensor) without the precision-aware
    optimizer (``aware``, or implied by 16-bit moments: ``--exp-avg-dtype`` needs it)."""
    return (
        ctx.rule.family == "megatron"
        and formats.master is not None
        and not aware
        and formats.optimizer == "fp32"
        and any(DTYPE_BYTES[t.grad_dtype] < 4 for t in trainable)
    )


def persistent_rows(
    held: list[HeldTensor],
    formats: StateFormats,
    opt: OptimizerSection,
    ctx: ShardContext,
) -> list[Row]:
    """Weights, master, gradient and optimizer rows for the tensors one rank holds: sized
    in one pass over the tensors where every state is one allocation per tensor
    (:mod:`~engine.ledger.states.one_pass`), state by state otherwise."""
    if not one_pass.applies(ctx):
        return persistent_rows_by_state(held, formats, opt, ctx)
    at = one_pass.sized_at_once(held, formats.master is not None, ctx, _CATEGORIES)
    return _rows_at_once(at, opt, ctx)


def folded_states(unsharded: tuple[HeldTensor, ...]) -> one_pass.Folded | None:
    """:func:`~engine.ledger.states.one_pass.folded` of a placement's held tensors at shard
    groups of one, for :func:`regrouped_persistent_rows` (the weights categories these
    rows have)."""
    return one_pass.folded(unsharded, _CATEGORIES)


def regrouped_persistent_rows(
    folded: one_pass.Folded | None,
    dense: int,
    expert: int,
    held: tuple[HeldTensor, ...],
    formats: StateFormats,
    opt: OptimizerSection,
    ctx: ShardContext,
) -> list[Row]:
    """:func:`persistent_rows` of ``held``, the held tensors ``folded`` folds
    (:func:`folded_states`) regrouped over ``dense`` and ``expert`` ranks
    (:func:`~engine.ledger.held.regrouped`): sized from the folded entries
    (:func:`~engine.ledger.states.one_pass.sized_folded`) where the one pass applies,
    by :func:`persistent_rows` otherwise."""
    if folded is None or not one_pass.applies(ctx):
        return persistent_rows(list(held), formats, opt, ctx)
    master = formats.master is not None
    at = one_pass.sized_folded(folded, dense, expert, held, master, ctx, _CATEGORIES)
    return _rows_at_once(at, opt, ctx)


def _rows_at_once(at: one_pass.AtOnce, opt: OptimizerSection, ctx: ShardContext) -> list[Row]:
    """The rows of states sized in one pass, in :func:`persistent_rows_by_state`'s order."""
    rows = [_weight_row(cat, *sized, ctx) for cat, sized in at.weights]
    if not at.trainable:
        return rows
    if at.master is not None:
        rows.append(_master_row(*at.master))
    grads = _grad_row(*at.grads, ctx)
    rows.append(stepped_in_backward(grads) if opt.in_backward else grads)
    rows.extend(optimizer_rows_of(at.copies, at.elements, opt, ctx))
    return rows


def persistent_rows_by_state(
    held: list[HeldTensor],
    formats: StateFormats,
    opt: OptimizerSection,
    ctx: ShardContext,
) -> list[Row]:
    """:func:`persistent_rows` sized state by state, each from its own pass over the
    tensors (the way for flat buffers, and the one-pass sizing's test reference)."""
    rows = weight_rows(held, ctx)
    trainable = [t for t in held if t.trainable]
    if not trainable:
        return rows
    if formats.master is not None:
        rows.append(master_row(trainable, formats, ctx))
    grads = grad_row(trainable, ctx)
    rows.append(stepped_in_backward(grads) if opt.in_backward else grads)
    if partitions_in_backward(ctx.rule):
        rows.append(grad_partition_row(trainable, ctx))
    if has_main_grad_shard(trainable, formats, ctx, opt.precision_aware):
        rows.append(main_grad_shard_row(trainable, ctx))
    rows.extend(optimizer_rows(trainable, opt, ctx))
    return rows
