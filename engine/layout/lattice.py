"""The TP × PP × CP × EP × DP lattice: every layout of a world size, legal or not, and why.

A layout is legal when the model can be cut that way and the batch can still be formed.
The rules are data (:class:`LayoutRules`) so a view can relax the topology rules (TP
inside a node, power-of-two TP) to compute the arithmetic minimum, and every rejected
layout keeps the reasons a user can act on. Nothing here estimates memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from engine.plan import Plan

MAX_LISTED_REJECTIONS = 100_000
"""Safety cap on rejected layouts kept for one world size (lists are for display)."""


@dataclass(frozen=True, slots=True)
class LayoutRules:
    """Which cuts count as legal. Defaults are the practical ones the counts use.

    ``tp_within_node``: TP all-reduces every layer, so it stays on NVLink (one node).
    ``tp_power_of_two``: kernels and head splits are tuned for powers of two.
    ``kv_replication``: TP larger than the KV heads replicates each KV head, as
    Megatron-LM and torchtitan do, when TP is a multiple of the KV heads.
    ``even_pp``: PP must divide the layers unless the plan gives an explicit split.
    """

    tp_within_node: bool = True
    tp_power_of_two: bool = True
    kv_replication: bool = True
    even_pp: bool = True

    def relaxed(self) -> LayoutRules:
        """The rules without topology preferences (for the arithmetic minimum)."""
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
    """A layout that cannot run, with every reason."""

    layout: Layout
    reasons: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Lattice:
    """All layouts of one world size: the legal ones in preference order, and the rest."""

    world_size: int
    legal: tuple[Layout, ...]
    rejected: tuple[Rejected, ...] = field(default=())


def divisors(n: int) -> list[int]:
    """Positive divisors of n in ascending order."""
    small, large = [], []
    i = 1
    while i * i <= n:
        if n % i == 0:
            small.append(i)
            if i * i != n:
                large.append(n // i)
        i += 1
    return small + large[::-1]


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def target_global_batch(plan: Plan) -> int:
    """The global batch the plan asks for: explicit, or micro × accumulation × replicas."""
    b, par = plan.batch, plan.parallelism
    if b.global_batch is not None:
        return b.global_batch
    return b.micro_batch * b.grad_accum * par.dp * par.ep


def ranks_per_node(plan: Plan) -> int:
    return plan.parallelism.ranks_per_node or plan.hardware.gpus_per_node


def shape_problems(plan: Plan, tp: int, pp: int, cp: int, ep: int, rules: LayoutRules) -> list[str]:
    """Why the model cannot be cut as TP × PP × CP × EP (empty when it can)."""
    arch, par = plan.model.architecture, plan.parallelism
    out: list[str] = []
    if arch.heads % tp:
        out.append(f"TP {tp} does not divide the {arch.heads} attention heads")
    elif arch.kv_heads % tp and not (rules.kv_replication and tp % arch.kv_heads == 0):
        out.append(
            f"TP {tp} neither divides the {arch.kv_heads} KV heads nor is a multiple of them "
            f"(KV heads cannot be replicated evenly)"
        )
    if rules.tp_power_of_two and not _is_pow2(tp):
        out.append(f"TP {tp} is not a power of two")
    rpn = ranks_per_node(plan)
    if rules.tp_within_node and (tp > rpn or rpn % tp):
        out.append(f"TP {tp} does not fit evenly inside one node of {rpn} GPUs")
    explicit_split = par.pp_layer_split is not None and pp == par.pp
    if pp > arch.layers:
        out.append(f"PP {pp} exceeds the {arch.layers} layers")
    elif rules.even_pp and not explicit_split and arch.layers % pp:
        out.append(f"PP {pp} does not divide the {arch.layers} layers (no explicit split given)")
    v = par.virtual_stages if pp > 1 else 1
    if v > 1 and not explicit_split and arch.layers % (pp * v):
        out.append(f"{arch.layers} layers do not split into PP {pp} × {v} virtual stages")
    if plan.batch.seq_len % cp:
        out.append(f"CP {cp} does not divide the sequence length {plan.batch.seq_len}")
    if ep > 1:
        if arch.moe is None:
            out.append(f"EP {ep} needs a mixture-of-experts model")
        elif arch.moe.num_experts % ep:
            out.append(f"EP {ep} does not divide the {arch.moe.num_experts} experts")
    return out


def batch_for(plan: Plan, ep: int, dp: int) -> tuple[int, int] | str:
    """(micro-batch, accumulation) for DP × EP replicas, or why the batch is unreachable.

    With ``hold_fixed = global_batch`` the global batch stays and accumulation absorbs
    the change; with ``micro_batch`` the micro-batch and accumulation stay and the
    global batch follows the replica count.
    """
    b = plan.batch
    if b.hold_fixed == "micro_batch":
        return b.micro_batch, b.grad_accum
    target = target_global_batch(plan)
    per_step = b.micro_batch * dp * ep
    if target % per_step:
        return (
            f"global batch {target} (held fixed) is not a multiple of micro-batch "
            f"{b.micro_batch} × {dp * ep} data-parallel replicas = {per_step}"
        )
    return b.micro_batch, target // per_step


def dp_problems(plan: Plan, dp: int) -> list[str]:
    sg = plan.parallelism.shard_group_size
    if sg is not None and dp % sg:
        return [f"the HSDP shard group {sg} does not divide DP {dp}"]
    return []


def check(
    plan: Plan, tp: int, pp: int, cp: int, ep: int, dp: int, rules: LayoutRules
) -> Layout | Rejected:
    """One lattice point: the legal :class:`Layout` or a :class:`Rejected` with reasons."""
    reasons = shape_problems(plan, tp, pp, cp, ep, rules) + dp_problems(plan, dp)
    batch = batch_for(plan, ep, dp)
    if isinstance(batch, str):
        reasons.append(batch)
        layout = Layout(tp, pp, cp, ep, dp, plan.batch.micro_batch, plan.batch.grad_accum)
    else:
        layout = Layout(tp, pp, cp, ep, dp, *batch)
    return Rejected(layout, tuple(reasons)) if reasons else layout


def enumerate_layouts(plan: Plan, world_size: int, rules: LayoutRules | None = None) -> Lattice:
    """Every TP × PP × CP × EP × DP factorisation of ``world_size``, judged.

    Legal layouts come in preference order (:meth:`Layout.preference`).
    """
    if world_size < 1:
        raise ValueError(f"world size must be at least 1, got {world_size}")
    rules = rules or LayoutRules()
    legal: list[Layout] = []
    rejected: list[Rejected] = []
    for tp in divisors(world_size):
        r1 = world_size // tp
        for pp in divisors(r1):
            r2 = r1 // pp
            for cp in divisors(r2):
                r3 = r2 // cp
                for ep in divisors(r3):
                    got = check(plan, tp, pp, cp, ep, r3 // ep, rules)
                    if isinstance(got, Layout):
                        legal.append(got)
                    elif len(rejected) < MAX_LISTED_REJECTIONS:
                        rejected.append(got)
    legal.sort(key=Layout.preference)
    return Lattice(world_size, tuple(legal), tuple(rejected))


def legal_shapes(plan: Plan, max_ranks: int, rules: LayoutRules) -> list[tuple[int, int, int, int]]:
    """Model-parallel shapes (TP, PP, CP, EP) the model admits within ``max_ranks``,
    in preference order. DP is searched separately."""
    arch = plan.model.architecture
    experts = arch.moe.num_experts if arch.moe else 1
    shapes = []
    par = plan.parallelism
    if rules.even_pp:
        pps = sorted(set(divisors(arch.layers)) | ({par.pp} if par.pp_layer_split else set()))
    else:
        pps = list(range(1, arch.layers + 1))
    for tp in divisors(arch.heads):
        for pp in (p for p in pps if p <= max_ranks):
            for cp in divisors(plan.batch.seq_len):
                for ep in divisors(experts):
                    m = tp * pp * cp * ep
                    if m > max_ranks:
                        continue
                    if not shape_problems(plan, tp, pp, cp, ep, rules):
                        shapes.append((tp, pp, cp, ep))
    shapes.sort(key=lambda s: Layout(s[0], s[1], s[2], s[3], 1).preference())
    return shapes


def with_layout(plan: Plan, layout: Layout) -> Plan:
    """The plan laid out as ``layout``.

    Built with ``model_copy`` (no re-validation) for speed: the lattice has already
    checked every cross-field rule that a layout change can break (head, layer,
    sequence and expert divisibility, shard group, batch).
    """
    par = plan.parallelism
    pp_split = par.pp_layer_split if layout.pp == par.pp else None
    v = par.virtual_stages if layout.pp > 1 else 1
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
