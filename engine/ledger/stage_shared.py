"""A kind of stage's shared rows, with what does not read DP or CP made once for both.

The shared rows of a stage (:mod:`engine.ledger.stage_rows`) read DP and CP only
through the shard group sizes of the dense and the routed-expert tensors — every row
but the last ones: the checkpoint event's (a consolidated checkpoint holds every rank's
RNG state) and the runtime's (its NCCL row counts the communicators a rank joins, and a
CP group is one). A layout search tries DP × CP products several ways (DP 16 and DP 8 ×
CP 2 shard alike), so everything before those rows (:class:`_Part`) is built once per
placement and pair of shard group sizes, and each plan adds its own last rows.

The part is built from the plan with its parallelism at DP 1 and CP 1
(:func:`~engine.ledger.states.persistent.placing_parallelism`) and the two shard group
sizes passed in, not merely keyed on them: a part's row that read DP or CP would be
wrong at once, in every golden plan with DP above one, not only on a cache hit. The
rows and sums are those the unfolded assembly builds
(``tests/engine/ledger/test_estimate_folding.py``, ``test_stage_shared.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from operator import attrgetter
from typing import Any, NamedTuple

from engine.ledger.activations.varying import Span
from engine.ledger.memo import Memo
from engine.ledger.peaks.backward_grads import backward_grad_rows
from engine.ledger.peaks.buckets import accumulation_rows, bucket_rows
from engine.ledger.peaks.checkpoint_event import checkpoint_rows
from engine.ledger.peaks.dequantize import dequantize_rows
from engine.ledger.peaks.float8 import float8_rows
from engine.ledger.peaks.gathered import gathered_rows
from engine.ledger.peaks.optimizer_in_backward import in_backward_rows
from engine.ledger.peaks.optimizer_step import deepspeed_step_rows, optimizer_temp_rows
from engine.ledger.peaks.runtime import outside_capacity, runtime_rows, side_bytes
from engine.ledger.phases import Sums, add_sums, moment_sums
from engine.ledger.placement import dense_dp_group, expert_dp_group
from engine.ledger.precision import resolve_formats
from engine.ledger.row import Row
from engine.ledger.shape_free import free_memo
from engine.ledger.sharding import shard_group_size
from engine.ledger.states.persistent import placing_parallelism, stage_states_at
from engine.ledger.states.zero_accumulation import next_partition_rows
from engine.ledger.states.zero_grad import grads_kept, kept_between_steps
from engine.plan import SECTION_ORDER, Plan, SectionsKey
from engine.stacks.families import stack_rule_of


@dataclass(frozen=True, slots=True)
class SharedRows:
    """The rows a kind of stage shares: those before the activation rows (persistent
    states), those after them, their allocated moment sums and runtime sums."""

    head: tuple[Row, ...]
    tail: tuple[Row, ...]
    sums: Sums
    runtime: Span
    inside: Span
    side: int = 0  # gathered units and buckets: the side-stream pools' working sets


def runtime_spans(plan: Plan, rows: Iterable[Row]) -> tuple[Span, Span]:
    """(all HBM runtime rows, those inside the verdict's capacity), each (low, high):
    one pass over the rows."""
    rt_low = rt_high = in_low = in_high = 0
    for r in rows:
        if r.location == "hbm" and r.state == "runtime":
            rt_low += r.low
            rt_high += r.high
            if not outside_capacity(plan, r):
                in_low += r.low
                in_high += r.high
    return (rt_low, rt_high), (in_low, in_high)


def shared_of(plan: Plan, stage: int) -> SharedRows:
    """The shared rows of ``stage`` (the stage whose shared rows stand for a kind's) in
    the shape-free ``plan``: its :class:`_Part`, then its own checkpoint-event and
    runtime rows (kept in the plan's memo). The stage's own (activation) rows never hold
    gradients (:class:`~engine.ledger.activations.varying.Fixed`): whether gradients sit
    in HBM is the shared rows' to say."""
    return free_memo(plan).get(("shared", stage), _shared, plan, stage)


def _shared(plan: Plan, stage: int) -> SharedRows:
    par = plan.parallelism
    rpn = par.ranks_per_node or plan.hardware.gpus_per_node
    dense = shard_group_size(par, dense_dp_group(par), rpn)
    expert = shard_group_size(par, expert_dp_group(par), rpn)
    placing, memo = _at_placing(plan)
    part = memo.get((stage, dense, expert), _part, placing, stage, dense, expert)
    last = checkpoint_rows(plan, part.unit, dense) + runtime_rows(plan, stage)
    (rt_low, rt_high), (in_low, in_high) = runtime_spans(plan, last)
    sums = part.sums
    if any(r.allocated for r in last):  # (a checkpoint event is; runtime rows never are)
        sums = add_sums(sums, moment_sums(last, plan.batch.grad_accum > 1))
    return SharedRows(
        part.head,
        (*part.tail, *last),
        sums,
        (part.runtime[0] + rt_low, part.runtime[1] + rt_high),
        (part.inside[0] + in_low, part.inside[1] + in_high),
        side_bytes((*part.head, *part.tail), plan),  # head: NO_SHARD's weight rows
    )


class _Part(NamedTuple):
    """A stage's shared rows but the checkpoint-event and runtime rows (which come
    last), their allocated moment sums and runtime sums, and the root unit's gathered
    bytes (what the checkpoint event reads of the rows)."""

    head: tuple[Row, ...]
    tail: tuple[Row, ...]
    sums: Sums
    runtime: Span
    inside: Span
    unit: int


_GROUP_OF = attrgetter("group")
"""A held tensor's shard group size (read in C)."""


def _part(plan: Plan, stage: int, dense: int, expert: int) -> _Part:
    """:class:`_Part` of ``stage`` of a plan at DP 1 and CP 1 (:func:`_at_placing`) whose
    dense and routed-expert tensors shard over ``dense`` and ``expert`` ranks."""
    rule = stack_rule_of(plan.parallelism.strategy, plan.stack.name)
    formats = resolve_formats(plan.method.precision)
    placed, held_t, ctx, head, unsharded = stage_states_at(plan, stage, dense, expert)
    kept = kept_between_steps(plan)  # zero_grad(set_to_none=False)
    head = grads_kept(head) if kept else head
    held = list(held_t)
    shard = max(map(_GROUP_OF, held), default=1)
    gathered = gathered_rows(plan, placed, formats, shard, rule, stage, n_expert=expert)
    tail: list[Row] = list(gathered)
    tail += bucket_rows(plan, held, formats, rule, shard, unsharded)
    in_hbm = any(r.state == "grads" and r.location == "hbm" for r in head + tail)
    stepped = plan.method.optimizer.in_backward  # optimizer_in_bwd: no step after backward
    tail += (
        []
        if kept
        else in_backward_rows(plan, held, ctx)
        if stepped
        else backward_grad_rows(plan, held, ctx, in_hbm)
    )
    tail += accumulation_rows(plan, held, rule)
    tail += next_partition_rows(plan, held, ctx)  # ZeRO-2 under accumulation (R7)
    if plan.method.kind == "qlora":
        gran, compiled = plan.runtime.allocation_granularity_bytes, plan.workload.torch_compile
        tail += dequantize_rows(held, plan.method.qlora, gran, compiled)
    tail += float8_rows(plan.method.precision, placed, plan.runtime.allocation_granularity_bytes)
    tail += [] if stepped else optimizer_temp_rows(plan, held, rule)
    tail += deepspeed_step_rows(plan, held, rule)
    unit = max((r.high for r in gathered if r.role == "root_unit"), default=0)
    rows = head + tail
    runtime, inside = runtime_spans(plan, rows)
    sums = moment_sums(rows, plan.batch.grad_accum > 1)
    return _Part(tuple(head), tuple(tail), sums, runtime, inside, unit)


def _at_placing(plan: Plan) -> tuple[Plan, Memo]:
    """``plan`` with its parallelism at DP 1 and CP 1, and its memo of :class:`_Part`
    values: one pair for every plan of the same other sections and placing parallelism
    (:func:`_placing_plan`)."""
    placing = placing_parallelism(plan.parallelism)
    fields = plan.__dict__
    return _placing_plan(
        SectionsKey([placing if name == "parallelism" else fields[name] for name in SECTION_ORDER])
    )


@lru_cache(maxsize=256)
def _placing_plan(sections: SectionsKey) -> tuple[Plan, Memo]:
    """The plan of these sections (in :data:`~engine.plan.SECTION_ORDER`), built without
    validation: every section comes from a validated plan, the parallelism at DP 1 and
    CP 1 (valid: the part's rows only read it). The plan holds the sections, so their
    identities in the cached key stay theirs."""
    fields: dict[str, Any] = dict(zip(SECTION_ORDER, sections, strict=True))
    return Plan.model_construct(**fields), Memo()
