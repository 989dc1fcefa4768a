"""estimate(plan) → Estimate: the one entry point every view uses.

Pure and fast: it builds the rank's rows for every pipeline stage, sums them per
phase, and decides fit by the heaviest rank of the heaviest stage — never the average.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache, partial

from engine.errors import PlanError
from engine.ledger.expert_padding import expert_padding_note
from engine.ledger.nodes.ledgers import NodeLedgers, node_ledgers, node_problems
from engine.ledger.peaks.runtime import stuck_bytes
from engine.ledger.phases import Range as Range
from engine.ledger.phases import new_range, peak_phase_of
from engine.ledger.placement import layer_classes, stage_layer_ranges
from engine.ledger.row import LOCATIONS, Location, Row
from engine.ledger.shape_free import unhashed_shape_free
from engine.ledger.stage_estimate import StageEstimate as StageEstimate
from engine.ledger.stage_estimate import StageTotals
from engine.ledger.stage_rows import StageMemo, StageNumbers, stage_memo, stage_numbers
from engine.legality.checks import check
from engine.plan import Plan
from engine.stacks.defaults import resolved
from engine.verdict import FitParts, deciding, fit_parts, judge, reason
from engine.verdict import Verdict as Verdict

VERDICT_WORDS: dict[Verdict, str] = {
    "fits": "FITS",
    "straddles": "STRADDLES THE LIMIT",
    "does_not_fit": "DOES NOT FIT",
}
"""How every view names a verdict (terminal, window, report): one wording."""


@dataclass(frozen=True, slots=True)
class StepBatch:
    """What one optimizer step consumes: micro-batch × accumulation × DP = the global
    batch, in sequences, and its tokens."""

    micro_batch: int
    grad_accum: int
    dp: int
    seq_len: int

    @property
    def global_batch(self) -> int:
        return self.micro_batch * self.grad_accum * self.dp

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch * self.seq_len

    def identity(self) -> str:
        """The global-batch identity in words, with the numbers."""
        return (
            f"micro-batch {self.micro_batch} × grad_accum {self.grad_accum} × DP {self.dp} = "
            f"global batch {self.global_batch:,} sequences × {self.seq_len:,} tokens = "
            f"{self.tokens_per_step:,} tokens per step"
        )


@dataclass(frozen=True, slots=True)
class Estimate:
    """Everything the views show, computed from one Plan."""

    plan: Plan  # as given (before the stack's defaults): what config_hash identifies
    world_size: int
    stages: tuple[StageEstimate, ...]
    heaviest_stage: int
    capacity_bytes: int
    limit_bytes: int  # capacity less the headroom policy
    verdict: Verdict
    # what must fit the capacity: reserved peak plus memory outside the allocator — the
    # heaviest stage's high, and the largest low of any stage (:func:`fit_range`)
    fit_peak: Range
    # the fit peak's parts at each end (engine.verdict.fit_parts): what the reason names
    fit_parts: FitParts
    nodes: NodeLedgers
    batch: StepBatch
    # only the stages that can be the heaviest were worked out (the layout search's)
    decisive_only: bool = False
    # which part of the fit peak takes it over the limit (engine.verdict.decider)
    decided_by: str = ""
    # why the host or NVMe ledgers do not fit (engine.ledger.nodes), each a sentence
    node_problems: tuple[str, ...] = ()

    @property
    def verdict_reason(self) -> str:
        """The verdict in words, with the numbers (:func:`engine.verdict.reason`), the
        node ledgers' problems first: worked out when a view shows it, so an estimate
        that is only compared (the layout search, a sweep's counts) formats nothing."""
        hbm = reason(self.fit_peak, self.fit_parts, self.limit_bytes, self.capacity_bytes)
        if self.node_problems:
            return "; ".join([*self.node_problems, f"HBM: {hbm}"])
        return hbm

    @property
    def notes(self) -> tuple[str, ...]:
        """Notes on the plan in words (none for a ``decisive_only`` estimate), worked out
        when a view reads them: the expert-padding note walks every placed tensor of
        every stage (~15 µs for an MoE model under FSDP2), which an estimate that is only
        compared or summed never needs. ``resolved`` is the one the estimate used."""
        if self.decisive_only:
            return ()
        return tuple(n for n in (expert_padding_note(resolved(self.plan)),) if n)

    @property
    def config_hash(self) -> str:
        """The plan's hash, worked out when asked: a view shows it, the layout search
        (hundreds of estimates) never does, and hashing is a JSON dump and a SHA-256."""
        return self.plan.config_hash()

    @property
    def heaviest(self) -> StageEstimate:
        return next(s for s in self.stages if s.stage == self.heaviest_stage)

    @property
    def rows(self) -> tuple[Row, ...]:
        return self.heaviest.rows

    @property
    def peak(self) -> Range:
        """Allocated HBM peak of the heaviest rank (what max_memory_allocated reports)."""
        return self.heaviest.peak

    def totals(self) -> dict[Location, Range]:
        return {loc: self.heaviest.location_total(loc) for loc in LOCATIONS}


def _stage(numbers: StageNumbers, stage: int, memo: StageMemo, plan: Plan) -> StageEstimate:
    key = numbers.key
    got = memo.stages.get(key)
    if got is None:  # else a stage of the same numbers was worked out: share them
        # (the numbers kept beside: they hold the base whose identity is in the key)
        got = memo.stages[key] = (_totals(numbers, memo), numbers)
    return StageEstimate(stage, numbers.layers, got[0], plan)


def _totals(numbers: StageNumbers, memo: StageMemo) -> StageTotals:
    """A stage's :class:`StageTotals` from its numbers: the peak phase — the first with
    the largest (high, low) (:func:`~engine.ledger.phases.peak_phase_of`) — and its fit
    peak (the unreleasable part of the reserve added); the allocator reserve itself, the
    device peak and each phase's range are worked out when read."""
    lows, highs = numbers.sums()
    peak_phase, low, high = peak_phase_of(lows, highs)
    base = numbers.base  # (its fields read here: StageNumbers' side / inside / runtime)
    shared = base.shared
    steady, side, model = (lows[0], highs[0]), base.side, memo.reserve
    stuck = s_low, s_high = stuck_bytes(model, low, high, steady)  # low, high: the peak
    fit_low, fit_high = shared.inside
    return _new_totals(
        (
            lows,
            highs,
            peak_phase,
            shared.runtime,
            new_range((low + s_low + fit_low, high + s_high + fit_high)),
            memo.accumulating,
            memo.keep_all_gathered,
            model,
            side,
            [],
            stuck,
        )
    )


_new_totals = partial(tuple.__new__, StageTotals)
"""A :class:`StageTotals` built in C from a tuple of its fields (no Python ``__new__``
frame: every stage of every estimate builds one)."""


def fit_range(stages: tuple[StageEstimate, ...], heaviest: StageEstimate) -> Range:
    """The job's fit peak: the heaviest stage's high (every stage must fit, and it holds
    the most at worst) and the largest low of any stage — a job whose lightest-looking
    stage holds more at best than the heaviest does at best cannot fit below that low,
    whichever stage peaks. Each stage's low is its largest of any phase already
    (:func:`~engine.ledger.phases.peak_phase_of`); with it the low figure never falls as
    a stage's states grow, which the layout search's proofs by the low figure need."""
    low = max(st.totals.fit_peak.low for st in stages)
    return new_range((low, heaviest.totals.fit_peak.high))


def decisive_stages(plan: Plan) -> tuple[int, ...]:
    """The pipeline stages that can be the heaviest: the first (embedding, the most
    micro-batches in flight), the last (output layer, logits, loss), and every middle
    stage that no earlier middle stage dominates.

    A middle stage holds only decoder layers and joins the same groups as every other
    middle stage (two pipeline neighbours), and no schedule keeps more micro-batches in
    flight on a later stage (1F1B: min(p − s, m); interleaved: fewer; GPipe: the same).
    An earlier middle stage dominates a later one when it holds the same sequence of
    layer classes (MoE models' dense and MoE layers are classes of their own), or when
    both hold layers of one class only and the earlier at least as many: it then holds at
    least as much of every row at every moment. Counts of each class alone do not
    suffice: a backward moment reads the layer live then (the first layer's MoE working
    set, the prefetched unit before the last), so a stage of [dense, MoE] does not
    dominate a later [MoE] whose first layer is routed. With a balanced or weighted
    split the first middle stage dominates all the others; an explicit uneven split can
    leave several undominated.
    """
    arch, par = plan.model.architecture, plan.parallelism
    pp = par.pp
    if pp <= 3:
        return tuple(range(pp))
    ranges = stage_layer_ranges(arch, par)
    class_of = {i: c for c, cls in enumerate(layer_classes(arch)[1]) for i in cls.layers}
    sequences = [tuple(class_of[i] for i in r) for r in ranges]
    keep = [0]
    for s in range(1, pp - 1):
        if not any(_dominates(sequences[e], sequences[s]) for e in keep if e > 0):
            keep.append(s)
    return (*keep, pp - 1)


def _dominates(earlier: tuple[int, ...], later: tuple[int, ...]) -> bool:
    """Whether a middle stage of layer classes ``earlier`` holds at least as much as a
    later one of ``later`` at every moment (see :func:`decisive_stages`)."""
    if earlier == later:
        return True
    kinds = set(earlier)
    return len(kinds) == 1 and set(later) == kinds and len(earlier) >= len(later)


def estimate(plan: Plan, decisive_only: bool = False) -> Estimate:
    """The per-rank memory estimate of a plan.

    Every field left at ``auto`` takes the training stack's default first
    (:func:`engine.stacks.defaults.resolved`); the estimate carries the plan's own hash.
    ``decisive_only`` computes only the stages that can be the heaviest (see
    :func:`decisive_stages`): the same verdict and peaks for a fraction of the work, for
    the layout search; views use the default, every stage.
    Raises :class:`PlanError` when the plan cannot run as laid out.

    Cached on the plan: the estimate is a pure function of it, and the window, the
    analysis and the report ask for the same plan's estimate again and again (redraws,
    undo / redo, each section of a report). A plan that raises is not cached.
    """
    return _estimate(plan, decisive_only)


@lru_cache(maxsize=128)
def _estimate(original: Plan, decisive_only: bool) -> Estimate:
    plan = resolved(original)
    check(plan)
    indices = decisive_stages(plan) if decisive_only else range(plan.parallelism.pp)
    try:
        free = unhashed_shape_free(plan)  # the resolved plan is never hashed on the way
        memo = stage_memo(plan, free)
        stages = tuple(
            _stage(numbers, s, memo, plan)
            for s, numbers in zip(indices, stage_numbers(plan, indices, free), strict=True)
        )
    except NotImplementedError as exc:
        raise PlanError(str(exc)) from exc
    top = stages[0]  # the heaviest: the largest fit peak's high, the first stage of ties
    for st in stages[1:]:
        high, top_high = st.totals.fit_peak.high, top.totals.fit_peak.high
        if high > top_high or (high == top_high and st.stage < top.stage):
            top = st
    heaviest = top.stage
    capacity = plan.hardware.capacity_bytes
    limit = plan.hbm_limit_bytes
    fit = fit_range(stages, top)
    parts = fit_parts(top.totals)
    if top.totals.fit_peak.low < fit.low:  # another stage's low decides the low end
        low = fit_parts(next(s.totals for s in stages if s.totals.fit_peak.low == fit.low))
        parts = FitParts(*((lo[0], hi[1]) for lo, hi in zip(low, parts, strict=True)))
    verdict: Verdict = judge(fit, limit)
    decided: str = deciding(verdict, parts, limit)
    nodes = node_ledgers(plan, communication=not decisive_only, free=free)
    problems = node_problems(plan, free)
    if problems:
        verdict, decided = "does_not_fit", "host or NVMe"
    return Estimate(
        plan=original,
        world_size=plan.parallelism.world_size,
        stages=stages,
        heaviest_stage=heaviest,
        capacity_bytes=capacity,
        limit_bytes=limit,
        verdict=verdict,
        fit_peak=fit,
        fit_parts=parts,
        nodes=nodes,
        batch=StepBatch(
            plan.batch.micro_batch,
            plan.batch.grad_accum,
            plan.parallelism.dp,
            plan.batch.seq_len,
        ),
        decisive_only=decisive_only,
        decided_by=decided,
        node_problems=problems,
    )
