"""The TP × PP × CP × DP lattice (EP folded over it): every layout of a world size, legal
or not, and why.

A layout is legal when it passes every hard rule of :mod:`engine.legality` (the model
can be cut that way, the stack can run it, the batch can still be formed, the offload
can run) and the *preferences* asked for (:class:`LayoutPreferences`: TP inside a node,
power-of-two TP, a full pipeline, …), which a view can relax to compute the arithmetic
minimum. Every rejected layout keeps the reasons a user can act on. Nothing here
estimates memory.

The rules each depend on one dimension, so they are judged once per value of that
dimension (:class:`_Judge`) and a layout's reasons are the concatenation: the search
enumerates thousands of shapes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from engine.errors import Problem
from engine.layout.candidates import padding_context, problems_in
from engine.layout.point import (
    Layout,
    LayoutPreferences,
    Rejected,
    batch_for,
    held_batch,
    is_pow2,
    split_words,
    target_global_batch,
)
from engine.layout.proofs import policy_split, ranks_per_node
from engine.legality import pipeline_layout, rules
from engine.legality.offload import offload_problems
from engine.legality.stack import adapter_tp_words, dimension_problems, stack_problems
from engine.plan import Plan, with_fields
from engine.stacks.catalog import concrete_stack

_T = TypeVar("_T")
_V = TypeVar("_V", int, tuple[int, int])

__all__ = [
    "Lattice",
    "Layout",
    "LayoutPreferences",
    "Rejected",
    "batch_for",
    "candidate_pipeline",
    "check",
    "enumerate_layouts",
    "every_layout_refused",
    "held_batch",
    "layout_of",
    "legal_shapes",
    "ranks_per_node",
    "split_words",
    "target_global_batch",
    "with_layout",
]

MAX_LISTED_REJECTIONS = 100_000
"""Safety cap on rejected layouts kept for one world size (lists are for display)."""


@dataclass(frozen=True, slots=True)
class Lattice:
    """All layouts of one world size: the legal ones in preference order, and the rest."""

    world_size: int
    legal: tuple[Layout, ...]
    rejected: tuple[Rejected, ...] = field(default=())


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


def _regular_pp(pp: int, layers: int) -> bool:
    return is_pow2(pp) or layers % pp == 0 or (layers + 2) % pp == 0


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
        par = plan.parallelism
        self.stack_name = concrete_stack(plan.stack.name, par.strategy, plan.method.kind)
        self.etp = plan.parallelism.expert_tp if self.arch.moe is not None else 1
        # judged once per value; a plain dict, not ``functools.cache`` of bound methods,
        # which would hold the judge in a reference cycle (garbage the layout search,
        # run with the cyclic collector paused and then frozen, would never free:
        # :mod:`engine.layout.counts`)
        self._judged: dict[tuple[object, object], object] = {}

    def _once(self, judge: Callable[[_Judge, _V], _T], value: _V) -> _T:
        key = (judge, value)
        if key not in self._judged:
            self._judged[key] = judge(self, value)
        return self._judged[key]  # type: ignore[return-value]

    def tp(self, tp: int) -> tuple[str, ...]:
        return self._once(_Judge._judge_tp, tp)

    def pp(self, pp: int) -> tuple[str, ...]:
        return self._once(_Judge._judge_pp, pp)

    def cp(self, cp: int) -> tuple[str, ...]:
        return self._once(_Judge._judge_cp, cp)

    def ep(self, ep: int) -> tuple[str, ...]:
        return self._once(_Judge._judge_ep, ep)

    def split(self, pp: int) -> rules.Split:
        return self._once(_Judge._split_of, pp)

    def _split_of(self, pp: int) -> rules.Split:
        return candidate_pipeline(self.plan, pp)[1]

    def _judge_dp(self, dp: int) -> tuple[str, ...]:
        return _messages(rules.dp_problems(dp, self.plan.parallelism.shard_group_size))

    def _judge_fold(self, folded: tuple[int, int]) -> tuple[str, ...]:
        ep, stage_ranks = folded
        return _messages(rules.fold_problems(ep, self.etp, stage_ranks, self.arch))

    def _batch_of(self, dims: tuple[int, int]) -> tuple[int, int] | Problem:
        return batch_for(self.plan, *dims)

    def check(self, tp: int, pp: int, cp: int, ep: int, dp: int) -> Layout | Rejected:
        """One layout, its reasons in the order :func:`engine.legality.checks.plan_problems`
        gives them (preferences beside the rules of their dimension)."""
        return self.check_eps(tp, pp, cp, dp, (ep,))[0]

    def check_eps(
        self, tp: int, pp: int, cp: int, dp: int, eps: Sequence[int]
    ) -> list[Layout | Rejected]:
        """:meth:`check` of one TP × PP × CP × DP point at each EP of ``eps``, what does
        not read EP judged once. The DP rule, the folding rule and the batch are judged
        once per value they read too (DP; EP and TP × CP × DP; DP and PP): a lattice's
        layouts share them by the hundred."""
        plan, etp = self.plan, self.etp
        head = self.tp(tp) + self.pp(pp) + self.cp(cp)
        by_dp = self._once(_Judge._judge_dp, dp)
        batch = self._once(_Judge._batch_of, (dp, pp))
        split = self.split(pp)
        stage_ranks = tp * cp * dp
        if isinstance(batch, Problem):
            b = plan.batch
            tail = (batch.message, *self.fixed)
            return [
                Rejected(
                    Layout(tp, pp, cp, ep, dp, b.micro_batch, b.grad_accum, etp, split),
                    head
                    + self.ep(ep)
                    + by_dp
                    + self._once(_Judge._judge_fold, (ep, stage_ranks))
                    + tail,
                )
                for ep in eps
            ]
        full: tuple[str, ...] = ()
        if self.prefs.pipeline_full and pp > 1 and batch[1] < pp:
            full = (
                f"PP {pp} holds only {batch[1]} micro-batch(es) per step (the held global "
                f"batch over DP {dp}); the pipeline needs m ≥ p = {pp} to stay full",
            )
        share = self.prefs.max_padding_share
        context = padding_context(plan) if share < 1 else None
        out: list[Layout | Rejected] = []
        for ep in eps:
            reasons = head + self.ep(ep) + by_dp
            reasons += self._once(_Judge._judge_fold, (ep, stage_ranks)) + full
            layout = Layout(tp, pp, cp, ep, dp, *batch, etp, split)
            if share < 1:
                reasons += problems_in(context, layout, share)
            reasons += self.fixed
            out.append(Rejected(layout, reasons) if reasons else layout)
        return out

    def _judge_tp(self, tp: int) -> tuple[str, ...]:
        arch, prefs = self.arch, self.prefs
        hard = _messages(rules.tp_problems(tp, arch) + self.stack("tp", tp))
        hard += adapter_tp_words(self.stack_name, self.plan.method.kind, tp)
        soft = []
        if not hard and not prefs.kv_replication and arch.kv_heads % tp:
            soft.append(
                f"TP {tp} replicates each of the {arch.kv_heads} KV heads "
                f"(whole KV heads per rank preferred)"
            )
        if prefs.tp_power_of_two and not is_pow2(tp):
            soft.append(f"TP {tp} is not a power of two")
        rpn = ranks_per_node(self.plan)
        if prefs.tp_within_node and (tp > rpn or rpn % tp):
            soft.append(f"TP {tp} does not fit evenly inside one node of {rpn} GPUs")
        return (*hard, *soft)

    def stack(self, dim: str, size: int) -> list[Problem]:
        return dimension_problems(self.stack_name, self.plan.parallelism.strategy, dim, size)

    def _judge_cp(self, cp: int) -> tuple[str, ...]:
        seq, prefs = self.plan.batch.seq_len, self.prefs
        hard = _messages(rules.cp_problems(cp, seq) + self.stack("cp", cp))
        soft = []
        if hard:
            return hard
        if cp > 1 and prefs.cp_power_of_two and not is_pow2(cp):
            soft.append(f"CP {cp} is not a power of two")
        if cp > 1 and seq // cp < prefs.cp_min_tokens:
            soft.append(
                f"not preferred: CP {cp} leaves {seq // cp} tokens per rank, fewer than "
                f"{prefs.cp_min_tokens:,} (a speed preference: the ring's attention no longer "
                f"hides its K/V transfer; it runs)"
            )
        return (*hard, *soft)

    def _judge_ep(self, ep: int) -> tuple[str, ...]:
        return _messages(rules.ep_problems(ep, self.arch) + self.stack("ep", ep))

    def _judge_pp(self, pp: int) -> tuple[str, ...]:
        par, layers = self.plan.parallelism, self.arch.layers
        v, split = candidate_pipeline(self.plan, pp)
        if pp == par.pp and par.pp_layout is not None:
            layout = pipeline_layout.layout_problems(
                par.pp_layout, pp, v, layers, self.arch.mtp_layers
            )
            if layout:
                return _messages(layout)
        hard = _messages(rules.pp_problems(pp, layers, v, split, par.pp_schedule))
        hard += _messages(self.stack("pp", pp))
        deepest = self.plan.policy.max_pp
        if self.prefs.pp_depth_capped and pp > deepest and pp != par.pp:
            hard += (
                f"PP {pp} is deeper than policy.max_pp = {deepest} (the deepest pipeline the "
                f"search proposes; raise it to search deeper)",
            )
        if self.prefs.pp_regular and pp <= layers and not _regular_pp(pp, layers):
            hard += (
                f"PP {pp} is neither a power of two nor an even split of the {layers} "
                f"layers (with or without the embedding and output counted as layers)",
            )
        return hard


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
                for got in judge.check_eps(tp, pp, cp, r2 // cp, eps):
                    if isinstance(got, Layout):
                        legal.append(got)
                    elif len(rejected) < MAX_LISTED_REJECTIONS:
                        rejected.append(got)
    legal.sort(key=Layout.preference)
    return Lattice(world_size, tuple(legal), tuple(rejected))


def legal_shapes(plan: Plan, max_ranks: int, prefs: LayoutPreferences) -> list[Layout]:
    """Model-parallel shapes (TP, PP, CP, EP) that pass every rule and preference
    within ``max_ranks`` (TP × PP × CP of them: EP adds none), in preference order, as
    layouts at DP 1 with the plan's batch, the expert TP and the stage split (the search
    fills in DP and the batch, with the EP folding rule).

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
    # sorted as plain tuples of Layout.preference's key (it names every dimension, so no
    # two shapes tie), and only then built: thousands of shapes for a large MoE model
    keys = sorted(
        (tp * pp * cp, pp, cp, -tp, ep)
        for tp in tps
        for pp in pps
        for cp in cps
        for ep in eps
        if tp * pp * cp <= max_ranks
    )
    b, etp = plan.batch, judge.etp
    splits = {pp: judge.split(pp) for pp in pps}
    return [
        Layout(-tp, pp, cp, ep, 1, b.micro_batch, b.grad_accum, etp, splits[pp])
        for _, pp, cp, tp, ep in keys
    ]


def with_layout(plan: Plan, layout: Layout) -> Plan:
    """The plan laid out as ``layout``.

    Built as ``model_copy`` would build it (no re-validation), by
    :func:`engine.plan.with_fields`, which skips pydantic's generic copy: the lattice
    has already judged the layout by every rule of :mod:`engine.legality`, load-time
    ones included, and the search lays out a plan hundreds of times.
    """
    par = plan.parallelism
    v = par.virtual_stages if layout.pp > 1 else 1
    own = layout.pp == par.pp and layout.pp_split == par.layer_split
    pp_split = None if own and par.pp_layout is not None else layout.pp_split
    new_par = with_fields(
        par,
        {
            "tp": layout.tp,
            "pp": layout.pp,
            "cp": layout.cp,
            "ep": layout.ep,
            "dp": layout.dp,
            "virtual_stages": v,
            "pp_layer_split": pp_split,
            "pp_layout": par.pp_layout if own else None,
            "expert_tp": layout.etp if plan.model.architecture.moe is not None else par.expert_tp,
        },
    )
    b = plan.batch
    gb = b.global_batch  # a set global batch stays set (the lattice kept it reachable)
    new_batch = with_fields(
        b, {"micro_batch": layout.micro_batch, "grad_accum": layout.grad_accum, "global_batch": gb}
    )
    return with_fields(plan, {"parallelism": new_par, "batch": new_batch})


def layout_of(plan: Plan) -> Layout:
    """The plan's own layout, with the batch the plan sets."""
    par, b = plan.parallelism, plan.batch
    etp = par.expert_tp if plan.model.architecture.moe is not None else 1
    split = candidate_pipeline(plan, par.pp)[1]
    return Layout(par.tp, par.pp, par.cp, par.ep, par.dp, b.micro_batch, b.grad_accum, etp, split)
