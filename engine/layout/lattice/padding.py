"""FSDP's dim-0 padding at a layout: how much of a unit's gathered copy is padding.

FSDP2 chunks every tensor on dim 0 into N equal chunks (rank r holds rows
``r·ceil(d0/N)`` onward, the last ranks padded), so an all-gather output and a
reduce-scatter input are ``ceil(d0/N) · N`` rows (``torch/distributed/fsdp/
_fully_shard/_fsdp_param.py``, ``FSDPParam._init_sharded_param``); FSDP1 pads its flat
parameter the same way. The padding is the one part of a rank's peak that can shrink
when N does, so the layout search bounds it (:func:`engine.layout.proofs.evaluate.slack`) and
prefers layouts where it stays small (``LayoutPreferences.max_padding_share``).
"""

from __future__ import annotations

from functools import lru_cache

from engine.layout.lattice.point import Layout
from engine.layout.proofs import layer_classes, ranks_per_node, shard_group_size
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
    ``max_share`` (see :class:`engine.layout.lattice.point.LayoutPreferences`), for the
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
