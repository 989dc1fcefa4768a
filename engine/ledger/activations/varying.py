"""A row that scales with the micro-batches a pipeline stage keeps in flight, split in two.

The stages of one make-up (the same layers and placed tensors) differ only in their
micro-batches in flight (:mod:`engine.ledger.activations.schedule`), and only through the
rows that scale with them: the saved activations, the once-per-forward tensors, the
labels and the saved log-probs. Each such row is built as a :class:`Varying` once per
make-up: ``span`` gives its bytes at a stage's :class:`InFlight`, ``build`` the row
from those bytes (handed to it). A stage's numbers then need no
row (:func:`engine.ledger.stage_rows.stage_numbers`), and its rows are built only when a
view reads them — from these same parts, so the two cannot disagree. The rows that do not
scale with the micro-batches in flight are :class:`Fixed` parts, split the same way.

Both are made per plan by a make-up's functions of the micro-batch's geometry
(:class:`engine.ledger.activations.rows.MakeUp`), which read the rest of the plan once
per plan without its micro-batch's size: a fresh plan only works out the bytes.

A part's ``build`` is only its row's words: :func:`built` / :func:`fixed_built` hand it
the part's own span and moments for the row's ``low`` / ``high`` and ``moments``, so
the bytes a stage's numbers sum and the bytes its rows show are one arithmetic (issue
34), not two kept equal by a test. The words (id, label, formula, source, phases) stay
the row function's own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from typing import NamedTuple

from engine.ledger.activations.schedule import InFlight
from engine.ledger.row import ALL_PHASES, Formula, Moment, Row, moments_in, span_row

Span = tuple[int, int]
"""A (low, high) byte count."""


Words = Callable[[Span, frozenset[Moment]], Row]
"""A :class:`Fixed` part's row from its bytes and moments: the words (id, label,
formula, source, phases) are the function's own; ``low`` / ``high`` and ``moments`` are
handed in from the part (what the numbers sum)."""

FlyWords = Callable[[InFlight, Span, frozenset[Moment]], Row]
"""A :class:`Varying` part's row at a stage's :class:`InFlight` from its bytes there and
its moments (as :data:`Words`; ``fly`` for the formula's words only)."""


class Varying(NamedTuple):
    """One row scaling with the micro-batches in flight: its bytes at a stage's
    :class:`InFlight`, its row's words, whether the allocator counts it (an HBM tensor)
    and the moments it is live at. :func:`built` hands ``build`` the part's own
    ``span(fly)`` and ``moments``: the row cannot show other bytes than the sum adds."""

    span: Callable[[InFlight], Span]
    build: FlyWords
    allocated: bool
    moments: frozenset[Moment]


def built(parts: Iterable[Varying], fly: InFlight) -> list[Row]:
    """The parts' rows at ``fly``, in order, each from its own span there."""
    return [p.build(fly, p.span(fly), p.moments) for p in parts]


class Fixed(NamedTuple):
    """A row of one micro-batch's bytes whatever the micro-batches in flight (the
    backward working set, the input batch and buffers, the loss's transients), split as
    :class:`Varying` is: ``span`` its bytes, worked out once, ``build`` its words, handed
    that span and ``moments`` (:func:`fixed_built`) only when a view reads the rows.
    ``allocated`` and ``moments`` as :class:`Varying`'s. Never a runtime row, nor one
    holding gradients (activations, inputs, buffers, the loss's tensors): a stage's
    runtime and gradient checks read the shared rows only."""

    span: Span
    build: Words
    allocated: bool
    moments: frozenset[Moment]


new_varying = partial(tuple.__new__, Varying)
"""A :class:`Varying` from a tuple of its fields, built in C (no Python ``__new__``
frame: every stage make-up of every fresh estimate builds some)."""
new_fixed = partial(tuple.__new__, Fixed)
"""A :class:`Fixed` from a tuple of its fields, built in C (as :data:`new_varying`)."""


_HELD = moments_in(ALL_PHASES)
"""Every moment of the step: a persistent buffer's life."""


def held_buffer(*, id: str, label: str, n: int, formula: Formula, source: str) -> Fixed:
    """A module buffer held the whole step in HBM, exact (``n`` bytes both ends): the
    RoPE caches and rotary / embedding-scale buffers of each stack's model are this one
    row shape, and differ only in their bytes, words and source."""

    def words(span: Span, moments: frozenset[Moment]) -> Row:
        return span_row(
            id=id,
            label=label,
            state="buffers",
            span=span,
            moments=moments,
            formula=formula,
            source=source,
            kind="persistent",
        )

    return new_fixed(((n, n), words, True, _HELD))


def fixed_built(parts: Iterable[Fixed]) -> list[Row]:
    """The parts' rows, in order, each from its own span and moments."""
    return [p.build(p.span, p.moments) for p in parts]
