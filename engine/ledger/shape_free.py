"""The plan without its micro-batch's shape, for rows that do not depend on it.

Most of a rank's ledger never reads the micro-batch's size, its sequence length, the
global batch or which of them is held: the states, gathered units, buckets, optimizer
temporaries, checkpoint and runtime rows of a stage
(:mod:`engine.ledger.stage_rows`), and the host, NVMe, checkpoint-storage and transfer
ledgers of a node (:mod:`engine.ledger.nodes.ledgers`). Built from :func:`shape_free` —
and cached on it —, they are shared by plans that differ only in that shape: the
window's batch edits, the fit search over micro-batch sizes and sequence lengths, a
plan estimated again. Built from that plan rather than merely keyed on it, a row that
did read the shape would be wrong at once, in every golden plan, not only on a cache
hit. Gradient accumulation is kept: buckets, backward gradients and transfers read it.

Plans that differ only in that shape get the very same shape-free plan object and memo
(:func:`_shape_free`, cached on the other sections and the accumulation), so every cache
keyed on it answers a fresh plan with one slot read and an identity check, and what is
worked out once per shape-free plan is kept in its memo (:func:`free_memo`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from operator import itemgetter
from typing import Any, Final

from engine.ledger.memo import Memo
from engine.plan import SECTION_ORDER, Plan, SectionsKey, with_section
from engine.sections.base import Section
from engine.sections.method import BatchSection

FIXED_SHAPE: dict[str, Any] = {
    "micro_batch": 1,
    "seq_len": 1,
    "global_batch": None,
    "hold_fixed": "micro_batch",
}
"""The batch fields :func:`shape_free` fixes, and the values it fixes them at."""

_NOT_BATCH: Final[tuple[str, ...]] = tuple(n for n in SECTION_ORDER if n != "batch")
_not_batch: Final[Callable[[dict[str, Any]], tuple[Section, ...]]] = itemgetter(*_NOT_BATCH)
"""A plan's :data:`_NOT_BATCH` sections from its fields, read in C (every estimate asks)."""


def shape_free(plan: Plan) -> Plan:
    """``plan`` with :data:`FIXED_SHAPE` in its batch section (no validation runs: the
    plan is only ever read by rows that ignore those fields); one object for every plan
    of the same other sections and gradient accumulation."""
    return _free_of(plan)[0]


def unhashed_shape_free(plan: Plan) -> Plan:
    """:func:`shape_free` found by the identities of ``plan``'s sections, without hashing
    ``plan`` itself: ``estimate()``'s resolved plan is a new object each fresh estimate,
    whose first hash walks every section (~4 µs), and nothing else on the estimate's way
    hashes it when the shape-free plan is handed on (the same object either way)."""
    fields = plan.__dict__
    return _shape_free(SectionsKey(_not_batch(fields)), fields["batch"].grad_accum)[0]


def free_memo(plan: Plan) -> Memo:
    """The :class:`~engine.ledger.memo.Memo` of ``plan``'s shape-free plan: what is
    worked out once per shape-free plan (size-free plans, make-ups, shared rows, node
    ledgers, communication) is kept there, not in one cache per function."""
    return _free_of(plan)[1]


@lru_cache(maxsize=256)
def _free_of(plan: Plan) -> tuple[Plan, Memo]:
    fields = plan.__dict__
    return _shape_free(SectionsKey(_not_batch(fields)), fields["batch"].grad_accum)


@lru_cache(maxsize=256)
def _shape_free(sections: SectionsKey, grad_accum: int) -> tuple[Plan, Memo]:
    """The shape-free plan of these sections (every one but the batch, in
    :data:`_NOT_BATCH` order) and this accumulation, and its memo. Built without
    validation: the sections come from a validated plan, and the fixed batch is valid by
    construction. The plan holds the sections, so their identities in the cached key
    stay theirs."""
    batch = BatchSection.model_construct(**FIXED_SHAPE, grad_accum=grad_accum)
    fields: dict[str, Any] = dict(zip(_NOT_BATCH, sections, strict=True))
    return Plan.model_construct(**fields, batch=batch), Memo()


def size_free(plan: Plan) -> Plan:
    """``plan`` at a micro-batch of one sequence, its sequence length kept (and the
    batch otherwise as :func:`shape_free` fixes it): what a stage make-up's activation
    rows read once (:func:`engine.ledger.activations.rows.make_up`), evaluated at each
    plan's own micro-batch. One object for every plan of the same shape-free plan and
    sequence length."""
    return size_free_of(shape_free(plan), plan.batch.seq_len)


def size_free_of(free: Plan, seq_len: int) -> Plan:
    """:func:`size_free`'s plan of this shape-free plan and sequence length (kept in its
    memo)."""
    return free_memo(free).get(("size_free", seq_len), _size_free, free, seq_len)


def _size_free(free: Plan, seq_len: int) -> Plan:
    batch = BatchSection.model_construct(
        **{**FIXED_SHAPE, "seq_len": seq_len}, grad_accum=free.batch.grad_accum
    )
    return with_section(free, "batch", batch)
