"""A shape's candidate DP values and, per DP, what the search's regimes read: its
layout, the FSDP padding preference's verdict and its regime key — the rules
(:func:`dp_candidates`, :func:`layout_at`) and one shape's judge of them all
(:class:`ShapeJudge`), which :class:`engine.layout.proofs.regimes.SearchMemo` keeps per
shape.

FSDP's dim-0 padding at a layout: FSDP2 chunks every tensor on dim 0 into N equal
chunks (rank r holds rows ``r·ceil(d0/N)`` onward, the last ranks padded), so an
all-gather output and a reduce-scatter input are ``ceil(d0/N) · N`` rows
(``torch/distributed/fsdp/_fully_shard/_fsdp_param.py``,
``FSDPParam._init_sharded_param``); FSDP1 pads its flat parameter the same way. The
padding is the one part of a rank's peak that can shrink when N does, so the search
bounds it (:func:`engine.layout.proofs.evaluate.slack`) and prefers layouts where it
stays small (``LayoutPreferences.max_padding_share``: :func:`problems_in`).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from functools import lru_cache

from engine.errors import Problem
from engine.layout.point import Layout, batch_for, held_batch
from engine.layout.proofs import layer_classes, ranks_per_node, shard_group_size
from engine.legality import rules
from engine.models.inventory import Tensor
from engine.models.roles import is_expert_parallel, tp_split_dim
from engine.models.spec import ArchitectureSpec
from engine.plan import Plan
from engine.sections.parallel import ParallelismSection
from engine.stacks.defaults import resolved
from engine.stacks.families import rule_of

Rows = tuple[tuple[int, int, int | None, bool, bool, int], ...]
"""Tensors as (dim 0, elements per dim-0 row, TP-split dim, routed expert, stacked
experts, how many alike) — identical tensors (a layer's experts) folded into one
entry."""


@lru_cache(maxsize=64)
def _units(arch: ArchitectureSpec) -> tuple[Rows, ...]:
    """The root unit's tensors and each class of decoder layer's (FSDP wraps one unit
    per layer), as row shapes."""
    root, classes = layer_classes(arch)

    def rows(ts: tuple[Tensor, ...]) -> Rows:
        alike: dict[tuple[int, int, int | None, bool, bool], int] = {}
        for t in ts:
            if t.shape and t.shape[0]:
                expert = is_expert_parallel(t)
                rest = t.numel // t.shape[0]
                key = (t.shape[0], rest, tp_split_dim(t), expert, expert and t.stacked)
                alike[key] = alike.get(key, 0) + 1
        return tuple((*key, n) for key, n in alike.items())

    return (rows(root), *(rows(c.tensors) for c in classes))


Split = tuple[tuple[tuple[int, int], ...], tuple[tuple[int, int], ...], int]
"""One unit's tensors at a TP and an expert TP: the dense and the routed-expert ones as
(local dim-0 rows, elements per row × how many alike), rows alike merged, and the
unpadded elements."""


def _split(rows: Rows, tps: tuple[int, int], ep: int) -> Split:
    """A unit's tensors each split by its TP (dense or expert) and, stacked experts, by
    EP on their expert dimension (dim 0: rank 0 of the EP group keeps ``ceil(E / ep)``
    of them, :func:`engine.ledger.placement.place_tensor`) — what its padding to any
    shard groups reads (:meth:`Padding._sharded`). A stacked tensor of fewer local
    experts than the experts' shard group has ranks is mostly padding once gathered."""
    parts: tuple[dict[int, int], dict[int, int]] = ({}, {})
    total = 0
    for d0, rest, split, expert, stacked, alike in rows:
        tp = tps[expert]
        local = -(-d0 // tp) if split == 0 else d0
        if stacked and ep > 1:
            local = -(-local // ep)
        width = -(-rest // tp) if split == 1 else rest
        part = parts[expert]
        part[local] = part.get(local, 0) + width * alike
        total += local * width * alike
    return tuple(parts[0].items()), tuple(parts[1].items()), total


class Padding:
    """What :func:`share_in` reads of one plan — its parallelism, resolved
    architecture and ranks per node — with the shares it has worked out: a search asks
    for the share of every DP of every shape (thousands), and many of them shard alike
    (the same shard groups and TPs), so each (TP, CP, DP, EP, expert TP) is looked up in
    one dict and each distinct sharding is padded out once."""

    __slots__ = (
        "_by_dims",
        "_by_groups",
        "_experts",
        "_hybrid",
        "_laid",
        "_split",
        "_stacked",
        "_units",
        "par",
        "rpn",
    )

    def __init__(self, par: ParallelismSection, arch: ArchitectureSpec, rpn: int) -> None:
        self.par, self.rpn = par, rpn
        self._units = _units(arch)
        # without routed-expert tensors the experts' group and TP pad nothing: one key
        self._experts = any(row[3] for unit in self._units for row in unit)
        # only stacked experts pad by EP (each expert its own tensor: EP takes whole ones)
        self._stacked = any(row[4] for unit in self._units for row in unit)
        self._hybrid = rule_of(par.strategy).hybrid  # else a group shards its replicas
        self._by_dims: dict[tuple[int, int, int, int, int], tuple[int, int]] = {}
        self._by_groups: dict[tuple[int, int, int, int, int], tuple[int, int]] = {}
        self._laid: dict[tuple[int, int], ParallelismSection] = {}
        self._split: dict[tuple[int, int, int], tuple[Split, ...]] = {}

    def share(self, tp: int, cp: int, dp: int, ep: int, etp: int) -> tuple[int, int]:
        """:func:`share_in` at these dimensions (not PP: FSDP units are layers, and
        a stage's units are padded like any other's)."""
        dims = (tp, cp, dp, ep, etp)
        got = self._by_dims.get(dims)
        if got is None:
            dense, expert = self._groups(tp, cp, dp, ep, etp)
            if not self._experts:
                expert, etp = 1, 1
            got = self._by_dims[dims] = self._sharded(
                dense, expert, tp, etp, ep if self._stacked else 1
            )
        return got

    def _groups(self, tp: int, cp: int, dp: int, ep: int, etp: int) -> tuple[int, int]:
        """The dense and the experts' shard groups."""
        edp = max(1, tp * cp * dp // (ep * etp))
        if not self._hybrid:  # what shard_group_size gives then
            return dp * cp, edp
        laid = self._laid.get((tp, cp))
        if laid is None:  # what shard_group_size reads besides the replica group
            laid = self._laid[tp, cp] = self.par.model_copy(update={"tp": tp, "cp": cp})
        return shard_group_size(laid, dp * cp, self.rpn), shard_group_size(laid, edp, self.rpn)

    def _sharded(self, dense: int, expert: int, tp: int, etp: int, ep: int) -> tuple[int, int]:
        key = (dense, expert, tp, etp, ep)
        got = self._by_groups.get(key)
        if got is None:
            units = self._split.get((tp, etp, ep))
            if units is None:
                units = self._split[tp, etp, ep] = tuple(
                    _split(u, (tp, etp), ep) for u in self._units
                )
            best_pad, best_size = 0, 1
            # each tensor's rows padded to a multiple of its group (ceil(rows / n) · n);
            # lists, not generators, and no call per unit: a search pads thousands
            for unit in units:
                pad = sum([(-local % dense) * w for local, w in unit[0]])
                if unit[1]:
                    pad += sum([(-local % expert) * w for local, w in unit[1]])
                if pad * best_size > best_pad * (pad + unit[2]):
                    best_pad, best_size = pad, pad + unit[2]
            got = self._by_groups[key] = (best_pad, best_size)
        return got


Context = Padding | None
"""What :func:`share_in` reads of a plan (:func:`padding_context`)."""


@lru_cache(maxsize=8)
def padding_context(plan: Plan) -> Context:
    """The plan's :class:`Padding`, or None when the strategy gathers no parameters:
    cached, so the lattice's judge, the search's candidates and its slacks share one (and
    the shares it has worked out) per plan."""
    par = plan.parallelism
    rule = rule_of(par.strategy)
    if not (rule.params and rule.fsdp):
        return None
    return Padding(par, resolved(plan).model.architecture, ranks_per_node(plan))


def share_in(context: Context, layout: Layout) -> tuple[int, int]:
    """The largest share of padding in any FSDP unit at this layout, as (padding,
    padded size) in elements, of the plan whose :func:`padding_context` is ``context``;
    (0, 1) when the strategy gathers no parameters. Taken of the resolved architecture —
    the tensors the ledger shards: an ``auto`` expert storage is one tensor per expert,
    the stack's own (``stacked`` / ``fused_gate_up``) one tensor of all experts split on
    the expert dimension, which pads where there are fewer experts than ranks."""
    if context is None:
        return 0, 1
    return context.share(layout.tp, layout.cp, layout.dp, layout.ep, layout.etp)


def problems_in(context: Context, layout: Layout, max_share: float) -> tuple[str, ...]:
    """The preference against FSDP shard groups that pad a unit by more than
    ``max_share`` (see :class:`engine.layout.point.LayoutPreferences`), for the
    plan whose :func:`padding_context` is ``context``."""
    if max_share >= 1:
        return ()
    pad, padded = share_in(context, layout)
    if pad <= max_share * padded:
        return ()
    return (
        f"FSDP over DP {layout.dp} pads a unit's gathered copy by {pad / padded:.0%} "
        f"(tensors with fewer rows than their shard group has ranks — a rank's stacked "
        f"experts under EP among them; more than {max_share:.0%}): use HSDP or fewer ranks",
    )


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
    :func:`engine.layout.candidates.problems_in` and
    the regime key by definition (the shape-points test compares them with
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
        """The regime key of the shape at ``dp`` (:mod:`engine.layout.proofs.regimes`): from
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
