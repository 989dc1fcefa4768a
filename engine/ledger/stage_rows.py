"""One pipeline stage's rows and allocated timeline, with identical work done once.

A stage's rows are of two kinds. Its *shared* rows — persistent states, gathered
units, gradient buckets, gradients made in backward, optimizer-step temporaries, the
checkpoint event, the runtime — depend on the stage only through the tensors it places
(:func:`engine.ledger.placement.representative_stages`: first / last, and how many of
its layers fall in each layer class) and, for DeepSpeed ZeRO-3's reuse distance, its
layer range. Its *activation* rows depend on the micro-batches the schedule keeps in
flight there, which differ from stage to stage under 1F1B (and say which stage in their
formula). So the shared rows and their allocated moment sums are built once per kind of
stage (kept in the shape-free plan's memo) and every stage adds its own
activation rows: PP16 builds the shared rows three times, not sixteen.

The shared rows never read the micro-batch's shape (its size, sequence length, the
global batch and which of them is held; gradient accumulation they do read), so they
are built from :func:`~engine.ledger.shape_free.shape_free` — the plan with that shape
at fixed values — and
kept in its memo: plans that differ only there (the window's batch edits, a plan estimated
again) share them. Built from that plan, not merely keyed on it, a shared row that did
read the shape would be wrong at once, in every golden plan, not only on a cache hit.
They are built in :mod:`engine.ledger.stage_shared`, which also shares all but their
runtime rows between plans whose DP and CP differ but shard alike.

One assembly: :func:`stage_numbers` works out each stage's parts — its shared rows
with their sums, its make-up's :class:`~engine.ledger.activations.varying.Fixed` and
:class:`~engine.ledger.activations.varying.Varying` parts — and its numbers are their
sums (:meth:`StageNumbers.sums`); ``estimate()`` builds no row. A view's first read of
a stage's rows builds them from those same parts (:meth:`StageNumbers.rows`), labels,
formulas and sources attached then; nothing assembles a stage twice. The rows are the
list a from-scratch assembly builds, row for row and in the same order
(``tests/engine/ledger/test_estimate_folding.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, NamedTuple

from engine.allocator.reserve import ReserveModel
from engine.ledger.activations.geometry import at_shape, geometry
from engine.ledger.activations.rows import FixedParts, MakeUp, make_up
from engine.ledger.activations.schedule import InFlight, in_flights
from engine.ledger.activations.stage_layers import Walk, layer_walks
from engine.ledger.activations.varying import Span, Varying, built
from engine.ledger.memo import Memo
from engine.ledger.peaks.runtime import loss_side, reserve_factors
from engine.ledger.phases import live_positions
from engine.ledger.placement import representative_stages, stage_layer_ranges
from engine.ledger.row import NO_MOMENTS, Row
from engine.ledger.shape_free import free_memo, shape_free, size_free_of
from engine.ledger.stage_shared import SharedRows, shared_of
from engine.ledger.states.persistent import placing_parallelism, stage_placed
from engine.plan import Plan
from engine.stacks.families import keeps_all_gathered, rule_of


class StageMemo(NamedTuple):
    """What every stage of one estimate shares (:func:`stage_memo`): the step-wide rules,
    the allocator reserve, and what the estimate worked out of the stages of equal
    numbers (by :attr:`StageNumbers.key`)."""

    accumulating: bool  # grad_accum > 1 (the timeline's rule)
    keep_all_gathered: bool  # every unit stays gathered forward → backward
    reserve: ReserveModel  # reserve_factors(plan)
    stages: dict[tuple[int, int, int], Any]


def stage_memo(plan: Plan, free: Plan) -> StageMemo:
    """A fresh :class:`StageMemo` of the resolved ``plan`` whose shape-free plan is
    ``free`` (built in C): neither rule reads the micro-batch's shape."""
    rules = (keeps_all_gathered(free.parallelism), reserve_factors(free))
    return tuple.__new__(StageMemo, (plan.batch.grad_accum > 1, *rules, {}))


class _Make(NamedTuple):
    """What a stage's rows read of the stage: its layers, their walk
    (:func:`~engine.ledger.activations.stage_layers.layer_walk`), the stage whose
    tensors it places (its representative), whether it is the last,
    and the stage whose shared rows stand for its own (:func:`_makes`)."""

    layers: range
    walk: Walk
    placing: int
    last: bool
    shared: int


def _makes(plan: Plan) -> tuple[_Make, ...]:
    """Every stage's :class:`_Make`, worked out once per shape-free plan (kept in its
    memo: each stage of an estimate would otherwise look up its range, walk and
    representative one by one). A stage's
    shared rows are those of the first stage placing the same tensors — itself under
    DeepSpeed ZeRO-3, whose reuse distance reads the layer range. Ranges and
    representatives are those of the parallelism at DP 1 and CP 1, as the placement's
    (neither reads DP or CP): one entry of their memo for every DP of a shape."""
    arch, par = plan.model.architecture, plan.parallelism
    rule = rule_of(par.strategy)
    own_range = rule.params and not rule.fsdp
    placing = placing_parallelism(par)
    ranges, reps = stage_layer_ranges(arch, placing), representative_stages(arch, placing)
    return tuple(
        _Make(
            ranges[s],
            walk,
            reps[s],
            s == par.pp - 1,
            s if own_range else reps[s],
        )
        for s, walk in enumerate(layer_walks(plan))
    )


class _FixedPart(NamedTuple):
    """A make-up's :class:`FixedParts` (summed once per make-up, :func:`_base`) and the
    rows that scale with its micro-batches in flight — its saved rows', its labels' and
    (the last stage) its logits' :class:`Varying` parts, also made once here, and each
    allocated one's live positions in MOMENTS (``live``, in order), which each stage
    sums. Fixed parts are never runtime rows nor hold gradients
    (:class:`~engine.ledger.activations.varying.Fixed`): the shared rows decide both."""

    parts: FixedParts
    saved: list[Varying]
    labels: list[Varying]
    logits: list[Varying]
    live: tuple[tuple[Callable[[InFlight], Span], tuple[int, ...]], ...]


def _make_up(memo: Memo, sized: Plan, seq_len: int, walk: Walk, placing: int, last: bool) -> MakeUp:
    """The :class:`MakeUp` of a stage whose layers walk as ``walk`` and which places the
    tensors of stage ``placing`` (its representative), of the shape-free plan (``memo``:
    its memo) at ``seq_len`` (``sized``: its :func:`~engine.ledger.shape_free.size_free`
    plan): made once for every plan that differs only in its micro-batch's size (the
    window's batch edits, the fit search; kept in the shape-free plan's memo), and built
    from the size-free plan, so a part that did read the size would be wrong at once."""
    return memo.get(
        ("make_up", seq_len, walk, placing, last), _new_make_up, sized, walk, placing, last
    )


def _new_make_up(sized: Plan, walk: Walk, placing: int, last: bool) -> MakeUp:
    return make_up(sized, walk, last, stage_placed(shape_free(sized), placing))


def _fixed(plan: Plan, sized: Plan, mu: MakeUp) -> _FixedPart:
    """The :func:`fixed_rows` of a stage of make-up ``mu`` (:func:`_make_up`), at the
    plan's micro-batch (``sized``: its size-free plan): the stages of one make-up
    (DeepSeek-V3's middle stages) share them, whatever their micro-batches in flight,
    and its varying parts too (they read the same). Worked out once per make-up and estimate
    (:func:`stage_numbers`, again when a view reads a stage's rows): not cached, as
    every fresh micro-batch would miss and evict.

    Built from the plan's :func:`~engine.ledger.shape_free.size_free` plan (the geometry
    is its at the plan's micro-batch; gradient accumulation is its), so a part that read
    anything else of the plan would be wrong at once."""
    one = geometry(sized)
    g = at_shape(one, plan.batch.micro_batch, one.seq)
    layers = mu.layers(g)
    fixed = mu.fixed(g, layers)
    accumulating = sized.batch.grad_accum > 1
    saved, labels = mu.saved(g, layers), mu.labels(g)
    logits = mu.logits(g) if mu.logits is not None else []
    live = tuple(
        [
            (p.span, live_positions(p.moments, NO_MOMENTS, accumulating))
            for p in (*saved, *labels, *logits)
            if p.allocated
        ]
    )
    return _new_fixed_part((fixed, saved, labels, logits, live))


def stage_rows(plan: Plan, stage: int) -> list[Row]:
    """The rows of one rank of ``stage`` (before the allocator reserve): those of its
    :func:`stage_numbers`, built from the very parts its sums add
    (:meth:`StageNumbers.rows`)."""
    return stage_numbers(plan, (stage,), shape_free(plan))[0].rows()


class _Base(NamedTuple):
    """A make-up's sums before its varying rows — the shared rows' and the fixed
    activation rows' allocated moment sums (lows, highs) — its side-stream bytes, and the
    parts themselves: their runtime sums and varying parts are read off them, and a
    view's rows built from them (:meth:`StageNumbers.rows`)."""

    lows: list[int]
    highs: list[int]
    side: int  # SharedRows.side, with the loss's (peaks.runtime.loss_side)
    shared: SharedRows
    fixed: _FixedPart


def _base(plan: Plan, free: Plan, fixed: _FixedPart, shared_stage: int) -> _Base:
    """:class:`_Base` of a stage of this make-up (its :func:`_fixed` part) whose shared
    rows are ``shared_stage``'s (see :class:`_Make`): worked out once per estimate
    (:func:`stage_numbers` keeps it for the make-up's stages)."""
    # Activation rows never hold gradients, nor are they runtime rows (activations,
    # inputs, buffers and the loss's tensors: :class:`Fixed`): the shared rows decide both.
    shared = shared_of(free, shared_stage)
    sums = shared.sums
    lows, highs = [low for low, _ in sums], [high for _, high in sums]
    accumulating = plan.batch.grad_accum > 1
    parts = fixed.parts
    for p in (*parts.held, *parts.tail):
        if p.allocated:
            low, high = p.span
            for i in live_positions(p.moments, NO_MOMENTS, accumulating):
                lows[i] += low
                highs[i] += high
    last = shared_stage == plan.parallelism.pp - 1  # the stage with the loss
    side = loss_side(shared.side, plan, last)
    return _new_base((lows, highs, side, shared, fixed))


class StageNumbers(NamedTuple):
    """What a stage's numbers are made of, before any row: its make-up's :func:`_base`,
    its micro-batches in flight and its decoder layers. Stages with the same base and
    the same in-flight count (``key``) have the same numbers — a pipeline's middle
    stages with as many micro-batches in flight (interleaved 1F1B's first stages)."""

    base: _Base
    fly: InFlight
    layers: range
    key: tuple[int, int, int]  # equal for equal numbers: the base's identity, fly's ratio

    @property
    def runtime(self) -> Span:
        return self.base.shared.runtime

    @property
    def inside(self) -> Span:
        return self.base.shared.inside

    @property
    def side(self) -> int:
        return self.base.side

    def sums(self) -> tuple[list[int], list[int]]:
        """The stage's allocated (lows, highs) at each of MOMENTS: the base's plus each
        varying part's bytes at the stage's micro-batches in flight — the sums of
        :meth:`rows`, which are built from the same parts."""
        base, fly = self.base, self.fly
        lows, highs = base.lows[:], base.highs[:]
        for span, live in base.fixed.live:
            low, high = span(fly)
            for i in live:
                lows[i] += low
                highs[i] += high
        return lows, highs

    def rows(self) -> list[Row]:
        """The stage's rows (before the allocator reserve), built when a view reads them
        from the parts :meth:`sums` adds: the shared head (persistent states), the
        activation rows around the varying ones at the stage's micro-batches in flight,
        the logits' (the last stage's), the shared tail."""
        shared, fixed, fly = self.base.shared, self.base.fixed, self.fly
        own = fixed.parts.rows().around(built(fixed.saved, fly), built(fixed.labels, fly))
        return [*shared.head, *own, *built(fixed.logits, fly), *shared.tail]


def stage_numbers(plan: Plan, stages: Sequence[int], free: Plan) -> list[StageNumbers]:
    """The numbers of these stages of the resolved ``plan`` (``free``: its shape-free
    plan) without building a row (see :class:`StageNumbers`); stages of one make-up work
    its parts and base out once."""
    memo = free_memo(free)  # looked up once: every make-up and size-free plan is kept there
    makes = memo.get("makes", _makes, free)
    seq = plan.batch.seq_len
    sized = size_free_of(free, seq)
    fixed: dict[tuple[Walk, int, bool], _FixedPart] = {}
    bases: dict[tuple[Walk, int, bool, int], _Base] = {}
    out = []
    for stage, fly in zip(stages, in_flights(plan, stages), strict=True):
        mk = makes[stage]
        key = (mk.walk, mk.placing, mk.last, mk.shared)
        base = bases.get(key)
        if base is None:
            part = fixed.get(key[:3])
            if part is None:
                mu = _make_up(memo, sized, seq, mk.walk, mk.placing, mk.last)
                part = fixed[key[:3]] = _fixed(plan, sized, mu)
            base = bases[key] = _base(plan, free, part, mk.shared)
        out.append(_new_numbers((base, fly, mk.layers, (id(base), fly.num, fly.den))))
    return out


_new_numbers = partial(tuple.__new__, StageNumbers)  # built in C
_new_base = partial(tuple.__new__, _Base)
_new_fixed_part = partial(tuple.__new__, _FixedPart)


def shared_rows(plan: Plan, stage: int) -> SharedRows:
    """``stage``'s shared rows in the resolved ``plan`` with their sums, exactly as
    :func:`stage_rows` adds them: the layout search's low bound
    (:mod:`engine.layout.proofs.stage_bounds`) needs the sums exactly, bounds the activation rows
    from below and the FSDP padding from the padded states' shared rows (torchtitan's
    head units regathered inside the loss rows are activation rows the bound never holds)."""
    free = shape_free(plan)
    return shared_of(free, free_memo(free).get("makes", _makes, free)[stage].shared)
