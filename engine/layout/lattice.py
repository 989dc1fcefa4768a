"""The TP × PP × CP × EP × DP lattice: every layout of a world size, legal or not, and why.

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
from engine.legality import rules
from engine.legality.offload import offload_problems
from engine.legality.stack import stack_problems
from engine.plan import Plan
from engine.sections.parallel import ParallelismSection

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
    ``even_pp``: PP divides the layers unless the plan gives an explicit split.
    """

    tp_within_node: bool = True
    tp_power_of_two: bool = True
    kv_replication: bool = True
    even_pp: bool = True

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

    @property
    def world_size(self) -> int:
        return self.tp * self.pp * self.cp * self.ep * self.dp

    @property
    def model_parallel(self) -> int:
        """Ranks one model replica spans besides DP: TP × PP × CP × EP."""
        return self.tp * self.pp * self.cp * self.ep

    @property
    def replicas(self) -> int:
        """Ranks that each consume their own micro-batches (DP × EP, as the engine counts)."""
        return self.dp * self.ep

    @property
    def global_batch(self) -> int:
        return self.micro_batch * self.grad_accum * self.replicas

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return (self.tp, self.pp, self.cp, self.ep)

    def label(self) -> str:
        return (
            f"TP{self.tp} PP{self.pp} CP{self.cp} EP{self.ep} DP{self.dp} "
            f"(mb {self.micro_batch} × ga {self.grad_accum})"
        )

    def preference(self) -> tuple[int, int, int, int, int]:
        """Sort key: least model parallelism first (it costs throughput), then TP
        before CP before PP before EP (TP stays on NVLink; PP adds bubbles)."""
        return (self.model_parallel, self.pp, self.ep, self.cp, -self.tp)


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
    return b.micro_batch * b.grad_accum * par.dp * par.ep


def held_batch(plan: Plan) -> int | None:
    """The global batch every layout must keep, or None when the micro-batch is held."""
    return target_global_batch(plan) if plan.batch.hold_fixed == "global_batch" else None


def ranks_per_node(plan: Plan) -> int:
    return plan.parallelism.ranks_per_node or plan.hardware.gpus_per_node


def candidate_pipeline(par: ParallelismSection, pp: int) -> tuple[int, rules.Split]:
    """Virtual stages and explicit split a layout of ``pp`` stages keeps: the plan's
    split only at the plan's own PP, interleaving only with more than one stage."""
    v = par.virtual_stages if pp > 1 else 1
    return v, (par.pp_layer_split if pp == par.pp else None)


def batch_for(plan: Plan, ep: int, dp: int) -> tuple[int, int] | Problem:
    """(micro-batch, accumulation) for DP × EP replicas, or why the batch is unreachable.

    With ``hold_fixed = global_batch`` the global batch stays and accumulation absorbs
    the change; with ``micro_batch`` the micro-batch and accumulation stay and the
    global batch follows the replica count.
    """
    b = plan.batch
    held = held_batch(plan)
    if held is None:
        return b.micro_batch, b.grad_accum
    unreachable = rules.global_batch_reachable(held, b.micro_batch, dp * ep)
    if unreachable:
        return unreachable
    return b.micro_batch, held // (b.micro_batch * dp * ep)


def _messages(problems: list[Problem]) -> tuple[str, ...]:
    return tuple(p.message for p in problems)


def every_layout_refused(plan: Plan) -> tuple[str, ...]:
    """Why every layout of the plan fails, whatever its shape (its offload placements,
    and the strategy or method its training stack cannot run)."""
    off, strategy = plan.offload, plan.parallelism.strategy
    return _messages(
        offload_problems(strategy, off.params, off.optimizer)
        + stack_problems(plan.stack.name, strategy, plan.method.kind)
    )


class _Judge:
    """One plan's hard rules and preferences, judged once per value of a dimension.

    Every rule depends on a single dimension, so a layout's reasons are the
    concatenation of its dimensions' reasons; memoised per value (``tp``, ``pp``, ``cp``,
    ``ep``), a lattice of thousands of layouts costs a few dozen rule evaluations.
    """

    def __init__(self, plan: Plan, prefs: LayoutPreferences) -> None:
        self.plan, self.prefs = plan, prefs
        self.arch = plan.model.architecture
        self.fixed = every_layout_refused(plan)
        self.tp = cache(self._judge_tp)
        self.pp = cache(self._judge_pp)
        self.cp = cache(self._judge_cp)
        self.ep = cache(self._judge_ep)

    def check(self, tp: int, pp: int, cp: int, ep: int, dp: int) -> Layout | Rejected:
        """One layout, its reasons in the order :func:`engine.legality.checks.plan_problems`
        gives them (preferences beside the rules of their dimension)."""
        plan = self.plan
        reasons = self.tp(tp) + self.pp(pp) + self.cp(cp) + self.ep(ep)
        reasons += _messages(rules.dp_problems(dp, plan.parallelism.shard_group_size))
        batch = batch_for(plan, ep, dp)
        if isinstance(batch, Problem):
            layout = Layout(tp, pp, cp, ep, dp, plan.batch.micro_batch, plan.batch.grad_accum)
            return Rejected(layout, (*reasons, batch.message, *self.fixed))
        reasons += self.fixed
        layout = Layout(tp, pp, cp, ep, dp, *batch)
        return Rejected(layout, reasons) if reasons else layout

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
        v, split = candidate_pipeline(par, pp)
        hard = _messages(rules.pp_problems(pp, layers, v, split, par.pp_schedule))
        if self.prefs.even_pp and split is None and pp <= layers and layers % pp:
            return (*hard, f"PP {pp} does not divide the {layers} layers (no explicit split given)")
        return hard


def check(
    plan: Plan, tp: int, pp: int, cp: int, ep: int, dp: int, prefs: LayoutPreferences
) -> Layout | Rejected:
    """One lattice point: the legal :class:`Layout` or a :class:`Rejected` with reasons."""
    return _Judge(plan, prefs).check(tp, pp, cp, ep, dp)


def enumerate_layouts(
    plan: Plan, world_size: int, prefs: LayoutPreferences | None = None
) -> Lattice:
    """Every TP × PP × CP × EP × DP factorisation of ``world_size``, judged.

    Legal layouts come in preference order (:meth:`Layout.preference`).
    """
    if world_size < 1:
        raise ValueError(f"world size must be at least 1, got {world_size}")
    judge = _Judge(plan, prefs or LayoutPreferences())
    legal: list[Layout] = []
    rejected: list[Rejected] = []
    for tp in rules.divisors(world_size):
        r1 = world_size // tp
        for pp in rules.divisors(r1):
            r2 = r1 // pp
            for cp in rules.divisors(r2):
                r3 = r2 // cp
                for ep in rules.divisors(r3):
                    got = judge.check(tp, pp, cp, ep, r3 // ep)
                    if isinstance(got, Layout):
                        legal.append(got)
                    elif len(rejected) < MAX_LISTED_REJECTIONS:
                        rejected.append(got)
    legal.sort(key=Layout.preference)
    return Lattice(world_size, tuple(legal), tuple(rejected))


def legal_shapes(
    plan: Plan, max_ranks: int, prefs: LayoutPreferences
) -> list[tuple[int, int, int, int]]:
    """Model-parallel shapes (TP, PP, CP, EP) that pass every rule and preference
    within ``max_ranks``, in preference order. DP is searched separately.

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
        (tp, pp, cp, ep)
        for tp in tps
        for pp in pps
        for cp in cps
        for ep in eps
        if tp * pp * cp * ep <= max_ranks
    ]
    shapes.sort(key=lambda s: Layout(s[0], s[1], s[2], s[3], 1).preference())
    return shapes


def with_layout(plan: Plan, layout: Layout) -> Plan:
    """The plan laid out as ``layout``.

    Built with ``model_copy`` (no re-validation) for speed: the lattice has already
    judged the layout by every rule of :mod:`engine.legality`, load-time ones included.
    """
    par = plan.parallelism
    v, pp_split = candidate_pipeline(par, layout.pp)
    new_par = par.model_copy(
        update={
            "tp": layout.tp,
            "pp": layout.pp,
            "cp": layout.cp,
            "ep": layout.ep,
            "dp": layout.dp,
            "virtual_stages": v,
            "pp_layer_split": pp_split,
            "expert_tp": min(par.expert_tp, layout.tp) if layout.ep > 1 else par.expert_tp,
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
    return Layout(par.tp, par.pp, par.cp, par.ep, par.dp, b.micro_batch, b.grad_accum)
