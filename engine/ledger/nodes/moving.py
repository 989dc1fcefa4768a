"""The model-parallel collectives of a stage, all but their sizes.

TP, PP, CP and EP move activations (:mod:`engine.ledger.nodes.communication`): their
sizes scale with the micro-batch's shape, and nothing else about them does — which
collectives run, over which groups, how many times. So those are worked out once per
:func:`~engine.ledger.shape_free.shape_free` plan and stage (:func:`moving`, kept per
plan by the communication), and a plan only works out each one's size at its own geometry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from engine.ledger.activations.geometry import Geometry
from engine.ledger.groups import Group, group_of, ranks_per_node, stage_groups
from engine.ledger.nodes.collectives import Collective
from engine.ledger.placement import stage_layer_ranges
from engine.ledger.states.persistent import stage_placed
from engine.plan import Plan


def groups_of(plan: Plan, stage: int) -> tuple[Group, ...]:
    """:func:`stage_groups` as a tuple (the builder is made from the shape-free plan, so
    plans differing only in the micro-batch's shape share a stage's groups)."""
    return tuple(stage_groups(plan, stage))


def _recomputed(plan: Plan, n: int) -> int:
    rec = plan.method.recompute
    return {"full": n, "every_k": n // rec.every_k}.get(rec.policy, 0)


class StageReads(NamedTuple):
    """What the model-parallel collectives read of a stage, besides the micro-batch's
    shape: its layers and recomputed layers, whether it holds the output layer, and its
    MoE layers (and their recomputed share) when it holds experts (else None)."""

    n: int
    rec: int
    lm_head: bool
    moe: tuple[int, int, int] | None  # (MoE layers, recomputed ones, top-k)
    groups: tuple[Group | None, Group | None, Group | None, Group | None]  # TP, PP, CP, EP


def stage_reads(plan: Plan, stage: int) -> StageReads:
    """:class:`StageReads` of a shape-free plan's stage (built from it: a read of the
    shape here would be wrong at once)."""
    par = plan.parallelism
    layers = stage_layer_ranges(plan.model.architecture, par)[stage]
    n = len(layers)
    rec = _recomputed(plan, n)
    placed = stage_placed(plan, stage)
    moe = plan.model.architecture.moe
    experts = None
    if moe is not None and any(t.expert for t in placed):
        n_moe = sum(1 for i in layers if i >= moe.first_dense_layers)
        experts = (n_moe, rec * n_moe // max(n, 1), moe.top_k)
    mine = groups_of(plan, stage)
    groups = (
        group_of(mine, "tp"),
        group_of(mine, "pp_next", "pp_prev"),
        group_of(mine, "cp"),
        group_of(mine, "ep"),
    )
    return StageReads(n, rec, any(t.tensor.role == "lm_head" for t in placed), experts, groups)


class Moving(NamedTuple):
    """A model-parallel collective of a stage, all but its size (which moves
    activations: it scales with the micro-batch's shape, ``size`` of its geometry)."""

    what: str
    collective: Collective
    group: Group
    times: int
    source: str
    size: Callable[[Geometry], int]


def _act(g: Geometry) -> int:
    """One micro-batch's hidden states."""
    return g.micro_batch * g.seq * g.hidden * g.compute_bytes


def _logits(g: Geometry) -> int:
    return g.micro_batch * g.seq * g.vocab * g.compute_bytes


def _kv(g: Geometry) -> int:
    return g.tokens * g.kv_local * (g.head_dim + g.v_dim) * g.compute_bytes


def moving(plan: Plan, stage: int) -> tuple[int, tuple[Moving, ...]]:
    """The ranks per node and the model-parallel collectives of a shape-free plan's
    stage that run (a group, a count): built once, only their sizes per plan."""
    par, m = plan.parallelism, plan.batch.grad_accum
    n, rec, lm_head, experts, (tp, pp_group, cp, ep) = stage_reads(plan, stage)
    out: list[Moving] = []

    def add(
        what: str,
        collective: Collective,
        group: Group | None,
        size: Callable[[Geometry], int],
        times: int,
        source: str,
    ) -> None:
        if group is not None and times > 0:  # else the builder would drop it
            out.append(Moving(what, collective, group, times, source, size))

    add("layer activations (TP)", "all-reduce", tp, _act, m * (4 * n + 2 * rec), "megatron-tp")
    if par.tp > 1 and par.tp_style == "replicated_embedding" and lm_head:
        add("gathered logits (TP)", "all-gather", tp, _logits, m, "hf-tp-plan")
    sends = int(stage < par.pp - 1) + int(stage > 0)
    add(
        "stage activations and their gradients (PP)",
        "p2p",
        pp_group,
        lambda g: _act(g) // par.tp,
        m * par.virtual_stages * sends,
        "megatron-pp-p2p",
    )
    add(
        "K/V chunks and their gradients (CP ring)",
        "p2p",
        cp,
        _kv,
        m * (par.cp - 1) * (3 * n + rec),
        "te-context-parallel",
    )
    if experts is not None:
        n_moe, rec_moe, top_k = experts
        add(
            "routed tokens, dispatch and combine (EP)",
            "all-to-all",
            ep,
            lambda g: g.seq_tokens * top_k * g.hidden * g.compute_bytes,
            m * (4 * n_moe + 2 * rec_moe),
            "megatron-moe-alltoall",
        )
    return ranks_per_node(plan), tuple(out)
