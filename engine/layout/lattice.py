"""The TP × PP × CP × DP lattice (EP folded over it): every layout of a world size, legal
or not, and why.

A layout is legal when it passes every hard rule of :mod:`engine.legality` (the model
can be cut that way, the batch can still be formed, the offload can run) and the
*preferences* asked for here (:class:`LayoutPreferences`: TP inside a node,
power-of-two TP, …), which a view can relax to compute the arithmetic minimum. Every
rejected layout keeps the reasons a user can act on. Nothing here estimates memory.

The rules each depend on one dimension, so they are judged once per value of that
dimension (:class:`_Judge`) and a layout's reasons are the concatenation: the search
enumerates tens of thousands of shapes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cache

from engine.errors import Problem
from engine.ledger.placement import policy_split
from engine.legality import pipeline_layout, rules
from engine.legality.offload import offload_problems
from engine.plan import Plan

MAX_LISTED_REJECTIONS = 100_000
"""Safety cap on rejected layouts kept for one world size (lists are for display)."""


@dataclass(frozen=True, slots=True)
class LayoutPreferences:
    """Which legal layouts count as practical. Defaults are the ones the counts use.

    None of these is a hard rule (those are :mod:`engine.legality`'s): each only ranks a
    layout out of the practical search, and :meth:`relaxed` drops the topology ones.
    ``tp_within_node``: TP all-reduces every layer, so it stays on NVLink (one node).
    ``tp_power_of_two``: kernels and head splits are tuned for powers of two.
    ``kv_replication``: allow TP larger than the KV heads (each KV head replicated on
    TP ÷ KV ranks, as Megatron-LM and torchtitan do); False asks for whole KV heads.
    No PP is refused for splitting the layers unevenly: a PP that does not divide them
    gets the plan's split policy (by default the weighted split, first and last stages
    one layer lighter), as torchtitan and Megatron run it.
    """

    tp_within_node: bool = True
    tp_power_of_two: bool = True
    kv_replication: bool = True

    def relaxed(self) -> LayoutPreferences:
        """The preferences without the topology ones (for the arithmetic minimum)."""
        return replace(self, tp_within_node=False, tp_power_of_two=False)


@dataclass(frozen=True, slots=True, order=True)
class Layout:
    """One point of the lattice with the batch geometry it implies."""

    tp: int
    pp: int
    cp: int
    ep: int
    dp: int
    micro_batch: int = 1
    grad_accum: int = 1
    etp: int = 1  # expert TP (MoE models), folded with EP over TP × CP × DP
    pp_split: tuple[int, ...] | None = None  # decoder layers per stage; None = equal

    @property
    def world_size(self) -> int:
        """TP × PP × CP × DP: EP and expert TP fold over the same ranks."""
        return self.tp * self.pp * self.cp * self.dp

    @property
    def model_parallel(self) -> int:
        """Ranks one model replica spans besides DP: TP × PP × CP."""
        return self.tp * self.pp * self.cp

    @property
    def replicas(self) -> int:
        """Ranks groups that each consume their own micro-batches: DP."""
        return self.dp

    @property
    def global_batch(self) -> int:
        return self.micro_batch * self.grad_accum * self.replicas

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return (self.tp, self.pp, self.cp, self.ep)

    def label(self) -> str:
        split = f" [{split_words(self.pp_split)}]" if self.pp_split else ""
        return (
            f"TP{self.tp} PP{self.pp}{split} CP{self.cp} EP{self.ep} DP{self.dp} "
            f"(mb {self.micro_batch} × ga {self.grad_accum})"
        )

    def preference(self) -> tuple[int, int, int, int, int]:
        """Sort key: least model parallelism first (it costs throughput), then TP
        before CP before PP (TP stays on NVLink; PP adds bubbles), then the least EP
        (fewest all-to-all peers)."""
        return (self.model_parallel, self.pp, self.cp, -self.tp, self.ep)


@dataclass(frozen=True, slots=True)
class Rejected:
    """A layout that cannot run (or is not practical), with every reason."""

    layout: Layout
    reasons: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Lattice:
    """All layouts of one world size: the legal ones in preference order, and the rest."""

    world_size: int
    legal: tuple[Layout, ...]
    rejected: tuple[Rejected, ...] = field(default=())


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def target_global_batch(plan: Plan) -> int:
    """The global batch the plan asks for: explicit, or micro × accumulation × replicas."""
    b, par = plan.batch, plan.parallelism
    if b.global_batch is not None:
        return b.global_batch
    return b.micro_batch * b.grad_accum * par.dp


def held_batch(plan: Plan) -> int | None:
    """The global batch every layout must keep, or None when the micro-batch is held."""
    return target_global_batch(plan) if plan.batch.hold_fixed == "global_batch" else None


def ranks_per_node(plan: Plan) -> int:
    return plan.parallelism.ranks_per_node or plan.hardware.gpus_per_node


def split_words(split: tuple[int, ...]) -> str:
    """A split in few characters, runs folded: (3, 4, 4, 4, 2) → "3,4×3,2"."""
    out: list[str] = []
    i = 0
    while i < len(split):
        j = i
        while j + 1 < len(split) and split[j + 1] == split[i]:
            j += 1
        out.append(f"{split[i]}×{j - i + 1}" if j > i else f"{split[i]}")
        i = j + 1
    return ",".join(out)


def candidate_pipeline(plan: Plan, pp: int) -> tuple[int, rules.Split]:
    """Virtual stages and split a layout of ``pp`` stages runs with: interleaving only
    with more than one stage; the plan's explicit split (or Megatron layout) at the
    plan's own PP; otherwise, without interleaving, the plan's split policy
    (:func:`policy_split`), given as an explicit split unless its stages are equal."""
    par, layers = plan.parallelism, plan.model.architecture.layers
    v = par.virtual_stages if pp > 1 else 1
    if pp == par.pp and par.layer_split is not None:
        return v, par.layer_split
    if pp > layers or v > 1:  # interleaving keeps equal chunks (legality's chunk rule)
        return v, None
    split = policy_split(layers, pp, par.pp_split_policy)
    return v, (None if len(set(split)) == 1 else split)


def batch_for(plan: Plan, dp: int) -> tuple[int, int] | Problem:
    """(micro-batch, accumulation) for DP replicas, or why the batch is unreachable.

    With ``hold_fixed = global_batch`` the global batch stays and accumulation absorbs
    the change; with ``micro_batch`` the micro-batch and accumulation stay and the
    global batch follows the replica count.
    """
    b = plan.batch
    held = held_batch(plan)
    if held is None:
        return b.micro_batch, b.grad_accum
    unreachable = rules.global_batch_reachable(held, b.micro_batch, dp)
    if unreachable:
        return unreachable
    return b.micro_batch, held // (b.micro_batch * dp)


def _messages(problems: list[Problem]) -> tuple[str, ...]:
    return tuple(p.message for p in problems)


def every_layout_refused(plan: Plan) -> tuple[str, ...]:
    """Why every layout of the plan fails, whatever its shape (its offload placements)."""
    off, strategy = plan.offload, plan.parallelism.strategy
    return _messages(offload_problems(strategy, off.params, off.optimizer))


class _Judge:
    """One plan's hard rules and preferences, judged once per value of a dimension.

    Every rule but one depends on a single dimension, so a layout's reasons are the
    concatenation of its dimensions' reasons; memoised per value (``tp``, ``pp``, ``cp``,
    ``ep``), a lattice of thousands of layouts costs a few dozen rule evaluations. The
    exception, EP × expert TP folding over TP × CP × DP, is one modulo per layout.
    """

    def __init__(self, plan: Plan, prefs: LayoutPreferences) -> None:
        self.plan, self.prefs = plan, prefs
        self.arch = plan.model.architecture
        self.fixed = every_layout_refused(plan)
        self.etp = plan.parallelism.expert_tp if self.arch.moe is not None else 1
        self.tp = cache(self._judge_tp)
        self.pp = cache(self._judge_pp)
        self.cp = cache(self._judge_cp)
        self.ep = cache(self._judge_ep)
        self.split = cache(lambda pp: candidate_pipeline(plan, pp)[1])

    def check(self, tp: int, pp: int, cp: int, ep: int, dp: int) -> Layout | Rejected:
        """One layout, its reasons in the order :func:`engine.legality.checks.plan_problems`
        gives them (preferences beside the rules of their dimension)."""
        plan = self.plan
        etp = self.etp
        reasons = self.tp(tp) + self.pp(pp) + self.cp(cp) + self.ep(ep)
        reasons += _messages(rules.dp_problems(dp, plan.parallelism.shard_group_size))
        reasons += _messages(rules.fold_problems(ep, etp, tp * cp * dp, self.arch))
        batch = batch_for(plan, dp)
        split = self.split(pp)
        if isinstance(batch, Problem):
            b = plan.batch
            layout = Layout(tp, pp, cp, ep, dp, b.micro_batch, b.grad_accum, etp, split)
            return Rejected(layout, (*reasons, batch.message, *self.fixed))
        reasons += self.fixed
        layout = Layout(tp, pp, cp, ep, dp, *batch, etp, split)
        return Rejected(layout, reasons) if reasons else layout

    def template(self, tp: int, pp: int, cp: int, ep: int) -> Layout:
        """The layout of one shape at DP 1, with the shape's expert TP and split (the
        search fills in DP and the batch)."""
        b = self.plan.batch
        return Layout(tp, pp, cp, ep, 1, b.micro_batch, b.grad_accum, self.etp, self.split(pp))

    def _judge_tp(self, tp: int) -> tuple[str, ...]:
        arch, prefs = self.arch, self.prefs
        hard = _messages(rules.tp_problems(tp, arch))
        soft = []
        if not hard and not prefs.kv_replication and arch.kv_heads % tp:
            soft.append(
                f"TP {tp} replicates each of the {arch.kv_heads} KV heads "
                f"(whole KV heads per rank preferred)"
            )
        if prefs.tp_power_of_two and not _is_pow2(tp):
            soft.append(f"TP {tp} is not a power of two")
        rpn = ranks_per_node(self.plan)
        if prefs.tp_within_node and (tp > rpn or rpn % tp):
            soft.append(f"TP {tp} does not fit evenly inside one node of {rpn} GPUs")
        return (*hard, *soft)

    def _judge_cp(self, cp: int) -> tuple[str, ...]:
        return _messages(rules.cp_problems(cp, self.plan.batch.seq_len))

    def _judge_ep(self, ep: int) -> tuple[str, ...]:
        return _messages(rules.ep_problems(ep, self.arch))

    def _judge_pp(self, pp: int) -> tuple[str, ...]:
        par, layers = self.plan.parallelism, self.arch.layers
        v, split = candidate_pipeline(self.plan, pp)
        if pp == par.pp and par.pp_layout is not None:
            layout = pipeline_layout.layout_problems(
                par.pp_layout, pp, v, layers, self.arch.mtp_layers
            )
            if layout:
                return _messages(layout)
        return _messages(rules.pp_problems(pp, layers, v, split, par.pp_schedule))


def check(
    plan: Plan, tp: int, pp: int, cp: int, ep: int, dp: int, prefs: LayoutPreferences
) -> Layout | Rejected:
    """One lattice point: the legal :class:`Layout` or a :class:`Rejected` with reasons."""
    return _Judge(plan, prefs).check(tp, pp, cp, ep, dp)


def enumerate_layouts(
    plan: Plan, world_size: int, prefs: LayoutPreferences | None = None
) -> Lattice:
    """Every TP × PP × CP × DP factorisation of ``world_size``, with each EP the model
    allows folded over it, judged.

    Legal layouts come in preference order (:meth:`Layout.preference`). A dense model
    has EP 1 only, so its lattice holds no expert-parallel layouts to reject.
    """
    if world_size < 1:
        raise ValueError(f"world size must be at least 1, got {world_size}")
    judge = _Judge(plan, prefs or LayoutPreferences())
    eps = rules.ep_values(plan.model.architecture)
    legal: list[Layout] = []
    rejected: list[Rejected] = []
    for tp in rules.divisors(world_size):
        r1 = world_size // tp
        for pp in rules.divisors(r1):
            r2 = r1 // pp
            for cp in rules.divisors(r2):
                for ep in eps:
                    got = judge.check(tp, pp, cp, ep, r2 // cp)
                    if isinstance(got, Layout):
                        legal.append(got)
                    elif len(rejected) < MAX_LISTED_REJECTIONS:
                        rejected.append(got)
    legal.sort(key=Layout.preference)
    return Lattice(world_size, tuple(legal), tuple(rejected))


def legal_shapes(plan: Plan, max_ranks: int, prefs: LayoutPreferences) -> list[Layout]:
    """Model-parallel shapes (TP, PP, CP, EP) that pass every rule and preference
    within ``max_ranks`` (TP × PP × CP of them: EP adds none), in preference order, as
    DP-1 layout templates (:meth:`_Judge.template`). DP is searched separately, with the
    EP folding rule.

    Each dimension's values are judged on their own (every rule concerns one
    dimension), so the shapes are the product of the passing values.
    """
    judge = _Judge(plan, prefs)
    if judge.fixed:
        return []
    arch = plan.model.architecture
    tps = [t for t in rules.tp_values(arch) if t <= max_ranks and not judge.tp(t)]
    pps = [p for p in rules.pp_values(arch.layers) if p <= max_ranks and not judge.pp(p)]
    cps = [c for c in rules.cp_values(plan.batch.seq_len) if c <= max_ranks and not judge.cp(c)]
    eps = [e for e in rules.ep_values(arch) if e <= max_ranks and not judge.ep(e)]
    shapes = [
        judge.template(tp, pp, cp, ep)
        for tp in tps
        for pp in pps
        for cp in cps
        for ep in eps
        if tp * pp * cp <= max_ranks
    ]
    shapes.sort(key=Layout.preference)
    return shapes


def with_layout(plan: Plan, layout: Layout) -> Plan:
    """The plan laid out as ``layout``.

    Built with ``model_copy`` (no re-validation) for speed: the lattice has already
    judged the layout by every rule of :mod:`engine.legality`, load-time ones included.
    """
    par = plan.parallelism
    v = par.virtual_stages if layout.pp > 1 else 1
    own = layout.pp == par.pp and layout.pp_split == par.layer_split
    pp_split = None if own and par.pp_layout is not None else layout.pp_split
    new_par = par.model_copy(
        update={
            "tp": layout.tp,
            "pp": layout.pp,
            "cp": layout.cp,
            "ep": layout.ep,
            "dp": layout.dp,
            "virtual_stages": v,
            "pp_layer_split": pp_split,
            "pp_layout": par.pp_layout if own else None,
            "expert_tp": layout.etp if plan.model.architecture.moe is not None else par.expert_tp,
        }
    )
    b = plan.batch
    gb = b.global_batch if b.hold_fixed == "global_batch" and b.global_batch else None
    new_batch = b.model_copy(
        update={
            "micro_batch": layout.micro_batch,
            "grad_accum": layout.grad_accum,
            "global_batch": gb,
        }
    )
    return plan.model_copy(update={"parallelism": new_par, "batch": new_batch})


def layout_of(plan: Plan) -> Layout:
    """The plan's own layout."""
    par, b = plan.parallelism, plan.batch
    etp = par.expert_tp if plan.model.architecture.moe is not None else 1
    split = candidate_pipeline(plan, par.pp)[1]
    return Layout(par.tp, par.pp, par.cp, par.ep, par.dp, b.micro_batch, b.grad_accum, etp, split)
