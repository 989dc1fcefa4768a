"""A shape's candidate DP values and, per DP, what the search's regimes read: its
layout, the FSDP padding preference's verdict and its regime key — the rules
(:func:`dp_candidates`, :func:`layout_at`) and one shape's judge of them all
(:class:`ShapeJudge`), which :class:`engine.layout.proofs.regimes.SearchMemo` keeps per shape."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from functools import lru_cache

from engine.errors import Problem
from engine.layout.lattice.batch import batch_for, held_batch
from engine.layout.lattice.padding import padding_context
from engine.layout.lattice.point import Layout
from engine.layout.proofs import ranks_per_node, shard_group_size
from engine.legality import rules
from engine.plan import Plan
from engine.stacks.families import rule_of

RegimeKey = tuple[object, ...]


def dp_candidates(plan: Plan, shape: Layout, max_dp: int, full: bool) -> Sequence[int]:
    """DP values the shard-group, EP-folding and batch rules allow for ``shape``,
    ascending, up to ``max_dp``; with ``full`` (the ``pipeline_full`` preference) a
    held global batch must still give a pipeline at least p micro-batches."""
    b, par = plan.batch, plan.parallelism
    step = rules.fold_step(shape.ep, shape.etp, shape.tp, shape.cp, plan.model.architecture)
    held = held_batch(plan)
    if full and held is not None and shape.pp > 1:
        max_dp = min(max_dp, held // (b.micro_batch * shape.pp))
    return rules.dp_values(max_dp, par.shard_group_size, held, b.micro_batch, step)


def layout_at(plan: Plan, shape: Layout, dp: int) -> Layout:
    """``shape`` at ``dp`` data-parallel ranks, with the batch it runs."""
    batch = batch_for(plan, dp, shape.pp)
    if isinstance(batch, Problem):  # dp_candidates only yields reachable batches
        raise AssertionError(batch.message)
    return shape.at_dp(dp, batch[0], batch[1])


class ShapeJudge:
    """What the search's memo (:class:`engine.layout.proofs.regimes.SearchMemo`) asks of one
    shape — its candidate DPs, and of each its layout, the padding preference's verdict
    and its regime — worked out from the shape's dimensions with what does not depend on
    DP read once: a dense model's shape has thousands of candidates, and every search
    round asks again. The same answers as :func:`dp_candidates`, :func:`layout_at`,
    :func:`engine.layout.lattice.padding.problems_in` and
    :func:`engine.layout.proofs.regimes.regime` (the shape-points test compares them with
    a walk that calls those). What does not depend on the shape is read once per plan
    (:class:`_PlanFacts`)."""

    __slots__ = (
        "_dps",
        "_step",
        "batch",
        "cp",
        "ep",
        "etp",
        "expert",
        "hybrid",
        "laid",
        "m",
        "moe",
        "padding",
        "plan",
        "rpn",
        "settled",
        "settled_key",
        "shape",
        "share",
        "tp",
    )

    def __init__(self, plan: Plan, shape: Layout, padding: float, full: bool = True) -> None:
        self.plan, self.shape = plan, shape
        facts = _plan_facts(plan, padding)
        # dp_candidates up to a top are a prefix of those up to a larger one: with a held
        # global batch, divisors of it (none above it), listed once; with the micro-batch
        # held, the multiples of one step (read off the range the rules give)
        held = facts.held
        self._dps = dp_candidates(plan, shape, held, full) if held is not None else None
        self._step = 0
        if held is None:
            multiples = dp_candidates(plan, shape, 1, full)
            assert isinstance(multiples, range)
            self._step = multiples.step
        self.tp, self.cp, self.ep, self.etp = shape.tp, shape.cp, shape.ep, shape.etp
        self.m = shape.model_parallel
        self.expert = shape.ep * shape.etp
        self.share, self.padding = facts.share, padding
        # a held micro-batch runs the same batch at every DP (batch_for reads no DP)
        self.batch = None if held is not None else facts.batch(shape.pp)
        self.rpn, self.moe, self.hybrid = facts.rpn, facts.moe, facts.hybrid
        par = plan.parallelism
        # shard_group_size reads the strategy, the explicit shard group, TP and CP only
        self.laid = par.model_copy(update={"tp": shape.tp, "cp": shape.cp}) if self.hybrid else par
        self._settle()

    def candidates(self, top: int) -> Sequence[int]:
        """:func:`dp_candidates` of the shape up to ``top``."""
        listed = self._dps
        if listed is None:
            return range(self._step, top + 1, self._step)
        return listed[: bisect_right(listed, top)]

    def refused(self, dp: int) -> bool:
        """Whether the padding preference refuses the shape at ``dp``."""
        if self.share is None:
            return False
        pad, padded = self.share(self.tp, self.cp, dp, self.ep, self.etp)
        return pad > self.padding * padded

    def layout(self, dp: int) -> Layout:
        """:func:`layout_at` the shape at ``dp``."""
        batch = self.batch
        if batch is None:
            return layout_at(self.plan, self.shape, dp)
        if isinstance(batch, Problem):
            raise AssertionError(batch.message)
        return self.shape.at_dp(dp, batch[0], batch[1])

    def regime(self, dp: int) -> RegimeKey:
        """:func:`engine.layout.proofs.regimes.regime` of the shape at ``dp``: from
        :attr:`settled` on, one key."""
        if dp >= self.settled:
            return self.settled_key
        return self._regime(dp)

    def _settle(self) -> None:
        """Where the key stops moving without HSDP (with it the shard groups move for
        good): once the job fills a node (m·DP ≥ ranks per node: the DP term is 0) and
        the dense group N = CP·DP is at least twice E = EP × expert TP, N > 1 and the
        expert group TP·N // E ≥ 2·TP > 1, and it equals N exactly when TP = E (for
        TP > E it is at least N + N // E > N, for TP < E below N) — so every term is
        fixed from there. A dense model's shape has thousands of DPs past it."""
        self.settled: int = 1 << 62
        self.settled_key: RegimeKey = ()
        if self.hybrid:
            return
        start = max(-(-self.rpn // self.m), -(-2 * self.expert // self.cp))
        self.settled, self.settled_key = start, self._regime(start)

    def _regime(self, dp: int) -> RegimeKey:
        dense = dp * self.cp
        key: list[object] = [dense > 1, dp if self.m * dp < self.rpn else 0]
        edp = self.tp * dense // self.expert
        if self.moe:
            key.append(edp > 1 and edp != dense)
        if self.hybrid:
            shard = shard_group_size(self.laid, dense, self.rpn)
            key += [shard, dense > shard]
            if self.moe:
                expert_shard = shard_group_size(self.laid, edp, self.rpn)
                key += [expert_shard, edp > expert_shard]
        return tuple(key)


class _PlanFacts:
    """What every :class:`ShapeJudge` of one plan and padding preference reads alike:
    the held global batch, the padding share, ranks per node, whether the model has
    experts and the strategy is hybrid, and (micro-batch held) each PP's batch."""

    __slots__ = ("_batches", "held", "hybrid", "moe", "plan", "rpn", "share")

    def __init__(self, plan: Plan, padding: float) -> None:
        self.plan = plan
        self.held = held_batch(plan)
        context = padding_context(plan) if padding < 1 else None
        self.share = None if context is None else context.share
        self.rpn = ranks_per_node(plan)
        self.moe = plan.model.architecture.moe is not None
        self.hybrid = rule_of(plan.parallelism.strategy).hybrid
        self._batches: dict[int, tuple[int, int] | Problem] = {}

    def batch(self, pp: int) -> tuple[int, int] | Problem:
        """``batch_for`` at DP 1 and ``pp`` stages."""
        got = self._batches.get(pp)
        if got is None:
            got = self._batches[pp] = batch_for(self.plan, 1, pp)
        return got


@lru_cache(maxsize=1)
def _plan_facts(plan: Plan, padding: float) -> _PlanFacts:
    """One plan's :class:`_PlanFacts` (kept while the search's judges are)."""
    return _PlanFacts(plan, padding)


def held_micro_batch(plan: Plan, padding: float, pp: int) -> tuple[int, int] | Problem:
    """The batch every DP of a ``pp``-stage shape runs when the micro-batch is held
    (``batch_for`` at DP 1), read from the plan's facts its judges share."""
    return _plan_facts(plan, padding).batch(pp)
