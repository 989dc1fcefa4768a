"""Communication per training step: bytes by collective and group, per rank, per link
class, and the least time they can take — a section of its own, not HBM.

What each strategy moves (per optimizer step, ``m`` micro-batches):

- DDP / FSDP1 NO_SHARD: gradients all-reduced over the data-parallel group once per
  micro-batch, once per step under ``no_sync`` (``knobs.accumulate_without_sync``)
  (``torch/nn/parallel/distributed.py`` reducer).
- ZeRO-1, Megatron's distributed optimizer: gradients reduce-scattered once per step,
  updated parameters all-gathered once (``megatron/core/distributed/
  param_and_grad_buffer.py``; DeepSpeed ``stage_1_and_2.py`` at the accumulation
  boundary); ZeRO-2 reduce-scatters every micro-batch.
- ZeRO-3 / FSDP: parameters all-gathered for every micro-batch's forward and again for
  its backward (once when units stay gathered), gradients reduce-scattered per
  micro-batch (once under no_sync); HSDP adds an all-reduce of the reduced shard over
  the replicate group (FSDP2 ``_fsdp_collectives.py``).
- TP (Megatron layers): two all-reduces of the layer's activations in forward and two
  in backward (all-gather + reduce-scatter pairs of the same volume under sequence
  parallelism), two more for each recomputed forward (Shoeybi et al. 2019 §3).
- Gathered logits (``tp_style`` replicated_embedding, TP > 1): the output layer is split
  by vocabulary and its logits all-gathered to every TP rank once per micro-batch's
  forward (transformers' ``lm_head: colwise_rep``, a DTensor redistribute to Replicate;
  Megatron's ``gather_from_tensor_model_parallel_region`` when ``parallel_output`` is
  off); the backward only slices the gradient, and no recompute repeats the head.
- PP: each micro-batch's activations to the next stage and their gradients back, split
  over the TP ranks (Megatron ``p2p_communication.py``, scatter-gather).
- CP: the K/V chunk passes the ring cp − 1 times in forward, K/V and dK/dV twice that in
  backward (TransformerEngine ``AttnFuncWithCPAndKVP2P``; the all-gather variant moves
  the same volume).
- EP: dispatch and combine all-to-alls of the routed tokens in forward and backward
  (Megatron ``MoEAlltoAllTokenDispatcher``).

The time is a floor: each link class's bytes over its bandwidth
(``hardware.intra_node_gbps``, ``hardware.inter_node_gbps``), the two classes
overlapping perfectly, at peak bandwidth, with no latency and no contention — never a
throughput promise.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.ledger.activations.geometry import geometry
from engine.ledger.groups import Group, GroupKind, group_of, ranks_per_node
from engine.ledger.nodes.collectives import Collective, split_by_link
from engine.ledger.nodes.moving import Moving, groups_of, moving
from engine.ledger.peaks.gathered import gather_bytes
from engine.ledger.placement import (
    dense_dp_group,
    expert_dp_group,
    representative_stages,
    stage_layer_ranges,
)
from engine.ledger.precision import DTYPE_BYTES, resolve_formats
from engine.ledger.shape_free import free_memo, shape_free
from engine.ledger.sharding import shard_group_size
from engine.ledger.states.persistent import stage_held
from engine.ledger.states.quantized import FLOATING_STORAGE
from engine.plan import Plan
from engine.stacks.families import keeps_all_gathered, rule_of
from engine.units import GB, fmt_count


@dataclass(frozen=True, slots=True)
class Transfer:
    """One kind of collective a rank runs in a step, and what it moves."""

    what: str
    collective: Collective
    group: str  # the group's label, e.g. "DP (16)"
    size: int  # bytes of one collective's full tensor (S)
    times: int  # collectives per step
    intra: int  # bytes this rank sends per step over the node's links
    inter: int  # … and over the network
    inside_node: bool  # every member of the group on one node
    source: str

    @property
    def formula(self) -> str:
        """The transfer in words, with its numbers: written when shown (the layout
        search and most estimates never read it)."""
        where = "inside the node" if self.inside_node else "across nodes"
        return (
            f"{self.times} × {self.collective} of {fmt_count(self.size)} B over {self.group} "
            f"{where}: {fmt_count(self.intra // self.times)} B on the node's links + "
            f"{fmt_count(self.inter // self.times)} B on the network per collective"
        )


@dataclass(frozen=True, slots=True)
class Communication:
    """A step's communication for one rank of the busiest stage, with its floor."""

    stage: int
    transfers: tuple[Transfer, ...]
    intra_gbps: float
    inter_gbps: float

    @property
    def intra_bytes(self) -> int:
        return sum(t.intra for t in self.transfers)

    @property
    def inter_bytes(self) -> int:
        return sum(t.inter for t in self.transfers)

    @property
    def intra_seconds(self) -> float:
        return self.intra_bytes / (self.intra_gbps * GB)

    @property
    def inter_seconds(self) -> float:
        return self.inter_bytes / (self.inter_gbps * GB)

    @property
    def floor_seconds(self) -> float:
        """The least time the step's communication can take (both links at once)."""
        return max(self.intra_seconds, self.inter_seconds)


def transfer(
    what: str,
    collective: Collective,
    group: Group,
    size: int,
    times: int,
    rpn: int,
    source: str,
) -> Transfer:
    """One collective ``times`` over ``group``, its bytes split over the link classes
    (:func:`split_by_link` at ``rpn`` ranks per node): the one way both the
    data-parallel transfers (:class:`_Builder`) and the model-parallel ones
    (:func:`stage_communication`) are built."""
    one = split_by_link(collective, group, size, rpn)
    return Transfer(
        what,
        collective,
        group.label,
        size,
        times,
        one.intra * times,
        one.inter * times,
        group.inside_node(rpn),
        source,
    )


class _Builder:
    """Collects one stage's transfers, splitting each over the link classes."""

    def __init__(self, plan: Plan, stage: int) -> None:
        self.rpn = ranks_per_node(plan)
        self.groups = groups_of(plan, stage)
        self.out: list[Transfer] = []

    def add(
        self,
        what: str,
        collective: Collective,
        group: Group | None,
        size: int,
        times: int,
        source: str,
    ) -> None:
        if group is None or size <= 0 or times <= 0:
            return
        self.out.append(transfer(what, collective, group, size, times, self.rpn, source))

    def kind(self, *kinds: GroupKind) -> Group | None:
        """:func:`group_of` the stage's groups: the first of one of these kinds."""
        return group_of(self.groups, *kinds)


def _state_bytes(plan: Plan, stage: int) -> dict[str, tuple[int, int, int]]:
    """Per DP class ("dense", "expert"): (gathered parameter bytes, parameter bytes,
    gradient bytes) of the tensors one rank of ``stage`` holds before sharding. A
    tensor is an expert one when its shard group is the expert group's size and that
    differs from the dense group's (equal groups move alike)."""
    par = plan.parallelism
    rpn = ranks_per_node(plan)
    dense = shard_group_size(par, dense_dp_group(par), rpn)
    expert = shard_group_size(par, expert_dp_group(par), rpn)
    gbpe = gather_bytes(plan, resolve_formats(plan.method.precision))
    packed_gathered = plan.method.qlora.quant_storage in FLOATING_STORAGE
    out = {"dense": [0, 0, 0], "expert": [0, 0, 0]}
    for t in stage_held(plan, stage)[0]:
        if t.category == "virtual":
            continue
        cls = out["expert" if t.group == expert and expert != dense else "dense"]
        n = t.numel * t.count
        if t.category == "quantized":  # packed NF4: two weights per byte, gathered so
            cls[0] += n // 2 if packed_gathered else 0  # uint8 storage: never gathered
            cls[1] += n // 2
        else:
            cls[0] += n * gbpe
            cls[1] += n * DTYPE_BYTES[t.param_dtype]
        if t.trainable:
            cls[2] += n * DTYPE_BYTES[t.grad_dtype]
    return {k: (v[0], v[1], v[2]) for k, v in out.items()}


def _data_parallel(b: _Builder, plan: Plan, stage: int) -> None:
    par, m = plan.parallelism, plan.batch.grad_accum
    rule = rule_of(par.strategy)
    no_sync = par.knobs.accumulate_without_sync
    src = rule.source
    for cls, (gathered, params, grads) in _state_bytes(plan, stage).items():
        if cls == "expert":
            shard = replicate = b.kind("expert_dp")
        else:
            shard = b.kind("dp_shard", "dp")
            replicate = b.kind("dp_replicate")
        tag = "expert " if cls == "expert" else ""
        if rule.shards_nothing:
            b.add(f"{tag}gradients", "all-reduce", shard, grads, 1 if no_sync else m, src)
        elif not rule.params:
            times = m if rule.grads and not no_sync else 1
            b.add(f"{tag}gradients", "reduce-scatter", shard, grads, times, src)
            b.add(f"{tag}updated parameters", "all-gather", shard, params, 1, src)
        else:
            b.add(f"{tag}parameters for forward", "all-gather", shard, gathered, m, src)
            if not keeps_all_gathered(par):
                b.add(f"{tag}parameters for backward", "all-gather", shard, gathered, m, src)
            times = 1 if no_sync else m
            b.add(f"{tag}gradients", "reduce-scatter", shard, grads, times, src)
            if cls == "dense" and replicate is not None and shard is not None:
                part = grads // shard.size
                b.add("gradient shards", "all-reduce", replicate, part, times, src)


def stage_communication(plan: Plan, stage: int) -> tuple[Transfer, ...]:
    """Every collective one rank of ``stage`` runs in a step: the data-parallel ones,
    which move states and never read the micro-batch's shape (built once per
    :func:`~engine.ledger.shape_free.shape_free` plan), then the model-parallel ones,
    which move activations (:func:`~engine.ledger.nodes.moving.moving`, their sizes at
    the plan's geometry). A rank's groups do not read the shape either."""
    free = shape_free(plan)
    rpn, moves = _moving(free, stage)
    out = list(free_memo(free).get(("data_parallel", stage), _data_parallel_transfers, free, stage))
    if moves:
        g = geometry(plan)
        for mv in moves:
            size = mv.size(g)
            if size <= 0:
                continue
            out.append(transfer(mv.what, mv.collective, mv.group, size, mv.times, rpn, mv.source))
    return tuple(out)


def _data_parallel_transfers(plan: Plan, stage: int) -> tuple[Transfer, ...]:
    b = _Builder(plan, stage)
    _data_parallel(b, plan, stage)
    return tuple(b.out)


def _stage_kinds(plan: Plan) -> tuple[tuple[int, int, int], ...]:
    """Everything :func:`stage_communication` reads of each stage: the tensors it places
    (its representative stage, which also says first / last), its layer count and its
    MoE layers."""
    arch, par = plan.model.architecture, plan.parallelism
    first_dense = arch.moe.first_dense_layers if arch.moe is not None else 0
    return tuple(
        (rep, len(layers), max(0, layers.stop - max(layers.start, first_dense)))
        for rep, layers in zip(
            representative_stages(arch, par), stage_layer_ranges(arch, par), strict=True
        )
    )


def step_communication(plan: Plan) -> Communication:
    """The busiest stage's communication per step (most bytes per rank) and its floor.
    Stages of one kind (:func:`_stage_kinds`) run the same collectives: computed once.
    When no stage moves activations (no TP, PP, CP or EP), nothing here reads the
    micro-batch's shape: worked out once per shape-free plan (:func:`still_communication`)."""
    free = shape_free(plan)
    return still_communication(free) or _busiest(plan, free)


def still_communication(free: Plan) -> Communication | None:
    """The communication of a shape-free plan none of whose stages runs a model-parallel
    collective (else None): only data-parallel ones, which move states (kept in the
    plan's memo)."""
    return free_memo(free).get("still_communication", _still, free)


def _still(free: Plan) -> Communication | None:
    if any(_moving(free, s)[1] for s in range(free.parallelism.pp)):
        return None
    return _busiest(free, free)


def _moving(free: Plan, stage: int) -> tuple[int, tuple[Moving, ...]]:
    """:func:`~engine.ledger.nodes.moving.moving`, kept in the shape-free plan's memo."""
    return free_memo(free).get(("moving", stage), moving, free, stage)


def _busiest(plan: Plan, free: Plan) -> Communication:
    kinds = free_memo(free).get("stage_kinds", _stage_kinds, free)  # the layout only
    done: dict[tuple[int, int, int], tuple[Transfer, ...]] = {}
    moved: dict[tuple[int, int, int], int] = {}
    stage, most = 0, -1
    for s, kind in enumerate(kinds):
        if kind not in done:
            done[kind] = stage_communication(plan, s)
            moved[kind] = sum([t.intra + t.inter for t in done[kind]])
        if moved[kind] > most:  # the first stage moving the most
            stage, most = s, moved[kind]
    hw = plan.hardware
    return Communication(stage, done[kinds[stage]], hw.intra_node_gbps, hw.inter_node_gbps)
