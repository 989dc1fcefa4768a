"""FSDP's dim-0 padding at a layout: how much of a unit's gathered copy is padding.

FSDP2 chunks every tensor on dim 0 into N equal chunks (rank r holds rows
``r·ceil(d0/N)`` onward, the last ranks padded), so an all-gather output and a
reduce-scatter input are ``ceil(d0/N) · N`` rows (``torch/distributed/fsdp/
_fully_shard/_fsdp_param.py``, ``FSDPParam._init_sharded_param``); FSDP1 pads its flat
parameter the same way. The padding is the one part of a rank's peak that can shrink
when N does, so the layout search bounds it (:func:`engine.layout.regimes.slack`) and
prefers layouts where it stays small (``LayoutPreferences.max_padding_share``).
"""

from __future__ import annotations

from functools import lru_cache

from engine.layout.point import Layout
from engine.ledger.groups import ranks_per_node
from engine.ledger.placement import layer_classes
from engine.ledger.sharding import shard_group_size
from engine.models.inventory import Tensor
from engine.models.roles import is_expert_parallel, tp_split_dim
from engine.models.spec import ArchitectureSpec
from engine.plan import Plan
from engine.sections.parallel import ParallelismSection
from engine.stacks.defaults import resolved
from engine.stacks.families import rule_of

Rows = tuple[tuple[int, int, int | None, bool, int], ...]
"""Tensors as (dim 0, elements per dim-0 row, TP-split dim, routed expert, how many
alike) — identical tensors (a layer's experts) folded into one entry."""


@lru_cache(maxsize=64)
def _units(arch: ArchitectureSpec) -> tuple[Rows, ...]:
    """The root unit's tensors and each class of decoder layer's (FSDP wraps one unit
    per layer), as row shapes."""
    root, classes = layer_classes(arch)

    def rows(ts: tuple[Tensor, ...]) -> Rows:
        alike: dict[tuple[int, int, int | None, bool], int] = {}
        for t in ts:
            if t.shape and t.shape[0]:
                key = (t.shape[0], t.numel // t.shape[0], tp_split_dim(t), is_expert_parallel(t))
                alike[key] = alike.get(key, 0) + 1
        return tuple((*key, n) for key, n in alike.items())

    return (rows(root), *(rows(c.tensors) for c in classes))


def _padding(rows: Rows, groups: tuple[int, int], tps: tuple[int, int]) -> tuple[int, int]:
    """(padding, unpadded) elements: each tensor split by its TP, padded to its group."""
    pad = total = 0
    for d0, rest, split, expert, alike in rows:
        n, tp = groups[expert], tps[expert]
        local = -(-d0 // tp) if split == 0 else d0
        width = -(-rest // tp) if split == 1 else rest
        pad += (-(-local // n) * n - local) * width * alike
        total += local * width * alike
    return pad, total


Context = tuple[ParallelismSection, ArchitectureSpec, int] | None
"""What :func:`padding_share` reads of a plan (:func:`padding_context`)."""


def padding_context(plan: Plan) -> Context:
    """The plan's parallelism, resolved architecture and ranks per node, or None when the
    strategy gathers no parameters: worked out once by a caller that asks about many
    layouts of one plan (the search judges every DP of every shape)."""
    par = plan.parallelism
    rule = rule_of(par.strategy)
    if not (rule.params and rule.fsdp):
        return None
    return par, resolved(plan).model.architecture, ranks_per_node(plan)


def padding_share(plan: Plan, layout: Layout) -> tuple[int, int]:
    """The largest share of padding in any FSDP unit at this layout, as (padding,
    padded size) in elements; (0, 1) when the strategy gathers no parameters. Taken of
    the resolved architecture — the tensors the ledger shards: an ``auto`` expert storage
    is one tensor per expert, the stack's own (``stacked`` / ``fused_gate_up``) one tensor
    of all experts split on the expert dimension, which pads where there are fewer
    experts than ranks."""
    return share_in(padding_context(plan), layout)


def share_in(context: Context, layout: Layout) -> tuple[int, int]:
    """:func:`padding_share` of a plan whose :func:`padding_context` is ``context``."""
    if context is None:
        return 0, 1
    return _share(*context, (layout.tp, layout.cp, layout.dp, layout.ep, layout.etp))


@lru_cache(maxsize=256)
def _with_tp_cp(par: ParallelismSection, tp: int, cp: int) -> ParallelismSection:
    """``par`` at this TP and CP: what :func:`shard_group_size` reads besides the replica
    group it is given (a node's DP ranks are its ranks ÷ TP × CP), so one copy serves
    every DP of a shape."""
    return par.model_copy(update={"tp": tp, "cp": cp})


@lru_cache(maxsize=65536)
def _share(
    par: ParallelismSection, arch: ArchitectureSpec, rpn: int, dims: tuple[int, int, int, int, int]
) -> tuple[int, int]:
    """:func:`padding_share` by the dimensions it depends on (not PP: FSDP units are
    layers, and a stage's units are padded like any other's), so the layout search and
    the lattice judge each (TP, CP, DP, EP, expert TP) once."""
    tp, cp, dp, ep, etp = dims
    laid = _with_tp_cp(par, tp, cp)
    dense = shard_group_size(laid, dp * cp, rpn)
    edp = max(1, tp * cp * dp // (ep * etp))
    groups = (dense, shard_group_size(laid, edp, rpn))
    best = (0, 1)
    for unit in _units(arch):
        pad, total = _padding(unit, groups, (tp, etp))
        if pad * best[1] > best[0] * (pad + total):
            best = (pad, pad + total)
    return best


def padding_problems(plan: Plan, layout: Layout, max_share: float) -> tuple[str, ...]:
    """The preference against FSDP shard groups that pad a unit by more than
    ``max_share`` (see :class:`engine.layout.point.LayoutPreferences`)."""
    if max_share >= 1:
        return ()
    return problems_in(padding_context(plan), layout, max_share)


def problems_in(context: Context, layout: Layout, max_share: float) -> tuple[str, ...]:
    """:func:`padding_problems` of a plan whose :func:`padding_context` is ``context``."""
    if max_share >= 1:
        return ()
    pad, padded = share_in(context, layout)
    if pad <= max_share * padded:
        return ()
    return (
        f"FSDP over DP {layout.dp} pads a unit's gathered copy by {pad / padded:.0%} "
        f"(tensors with fewer rows than ranks; more than {max_share:.0%}): use HSDP or "
        f"fewer ranks",
    )
