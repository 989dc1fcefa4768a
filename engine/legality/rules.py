"""The hard layout rules on plain values, each written once, grouped by dimension.

A rule returns a :class:`Problem` (the fields it concerns and one sentence naming
them) or ``None`` when it passes. The rules take numbers, not a Plan, for two callers:
the plan's pydantic validators run the load-time ones while the Plan is still being
built, and the layout lattice judges thousands of candidate layouts without building
a Plan for each. Every rule depends on one parallel dimension only (TP, PP, CP, EP,
DP, or DP × EP for the batch), so the lattice evaluates each group once per value of
its dimension rather than once per layout.

Which rules refuse a file at load time and which only refuse ``estimate()`` is
unchanged from before the rules were gathered here: see each group's heading.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import gcd, lcm

from engine.errors import Problem
from engine.models.spec import ArchitectureSpec

Split = tuple[int, ...] | None
"""``parallelism.pp_layer_split``: explicit decoder layers per stage, or balanced."""

# --- Pipeline split against the section alone (load time: ParallelismSection) --------


def split_length(split: Split, pp: int) -> Problem | None:
    if split is None or len(split) == pp:
        return None
    return Problem(
        ("parallelism.pp_layer_split", "parallelism.pp"),
        f"parallelism.pp_layer_split has {len(split)} entries but parallelism.pp is {pp}: "
        f"give one layer count per pipeline stage",
    )


def split_non_negative(split: Split) -> Problem | None:
    if split is None or all(n >= 0 for n in split):
        return None
    return Problem(
        ("parallelism.pp_layer_split",),
        "parallelism.pp_layer_split entries must be non-negative layer counts",
    )


def one_explicit_split(split: Split, layout: str | None) -> Problem | None:
    if split is None or layout is None:
        return None
    return Problem(
        ("parallelism.pp_layer_split", "parallelism.pp_layout"),
        "give parallelism.pp_layer_split or parallelism.pp_layout, not both",
    )


def virtual_needs_interleaving(virtual_stages: int, schedule: str) -> Problem | None:
    if virtual_stages == 1 or schedule == "interleaved_1f1b":
        return None
    return Problem(
        ("parallelism.virtual_stages", "parallelism.pp_schedule"),
        f"parallelism.virtual_stages ({virtual_stages}) > 1 needs parallelism.pp_schedule "
        f"interleaved_1f1b (not {schedule})",
    )


# --- Data parallelism (load time: ParallelismSection) --------------------------------


def shard_group_divides_dp(shard_group_size: int | None, dp: int) -> Problem | None:
    if shard_group_size is None or dp % shard_group_size == 0:
        return None
    return Problem(
        ("parallelism.shard_group_size", "parallelism.dp"),
        f"parallelism.shard_group_size ({shard_group_size}) must divide parallelism.dp ({dp})",
    )


# --- Pipeline stages against the model (load time: Plan) -----------------------------


def split_sums_to_layers(split: Split, layers: int) -> Problem | None:
    if split is None or sum(split) == layers:
        return None
    return Problem(
        ("parallelism.pp_layer_split", "model.architecture.layers"),
        f"parallelism.pp_layer_split sums to {sum(split)} layers but the model has {layers} "
        f"(model.architecture.layers)",
    )


def pp_within_layers(pp: int, layers: int) -> Problem | None:
    if pp <= layers:
        return None
    return Problem(
        ("parallelism.pp", "model.architecture.layers"),
        f"parallelism.pp ({pp}) exceeds the model's {layers} layers (model.architecture.layers)",
    )


# --- Rules only estimate() enforces (a file holding them still loads) ----------------


def virtual_chunks_even(layers: int, pp: int, virtual_stages: int, split: Split) -> Problem | None:
    """Interleaving cuts the layers into pp × v equal chunks unless a split is given."""
    if virtual_stages == 1 or split is not None or layers % (pp * virtual_stages) == 0:
        return None
    return Problem(
        ("parallelism.virtual_stages", "parallelism.pp", "model.architecture.layers"),
        f"the {layers} layers (model.architecture.layers) do not split into parallelism.pp × "
        f"parallelism.virtual_stages = {pp} × {virtual_stages} = {pp * virtual_stages} equal "
        f"chunks: change either, or give parallelism.pp_layer_split",
    )


def tp_divides_heads(tp: int, heads: int) -> Problem | None:
    if heads % tp == 0:
        return None
    return Problem(
        ("parallelism.tp", "model.architecture.heads"),
        f"parallelism.tp ({tp}) must divide the {heads} attention heads (model.architecture.heads)",
    )


def tp_fits_kv_heads(tp: int, kv_heads: int) -> Problem | None:
    """Each rank holds whole KV heads, or TP is a multiple of them and each KV head is
    replicated on TP ÷ KV ranks (Megatron-LM and torchtitan do so); nothing else runs."""
    if kv_heads % tp == 0 or tp % kv_heads == 0:
        return None
    return Problem(
        ("parallelism.tp", "model.architecture.kv_heads"),
        f"parallelism.tp ({tp}) must divide the {kv_heads} KV heads "
        f"(model.architecture.kv_heads) or be a multiple of them",
    )


def cp_divides_sequence(cp: int, seq_len: int) -> Problem | None:
    if seq_len % cp == 0:
        return None
    return Problem(
        ("parallelism.cp", "batch.seq_len"),
        f"parallelism.cp ({cp}) must divide the sequence length {seq_len} (batch.seq_len)",
    )


def ep_needs_experts(ep: int, arch: ArchitectureSpec) -> Problem | None:
    if ep == 1 or arch.moe is not None:
        return None
    return Problem(
        ("parallelism.ep", "model.architecture.moe"),
        f"parallelism.ep ({ep}) > 1 needs a mixture-of-experts model "
        f"(model.architecture.moe is not set)",
    )


def ep_divides_experts(ep: int, arch: ArchitectureSpec) -> Problem | None:
    if arch.moe is None or arch.moe.num_experts % ep == 0:
        return None
    return Problem(
        ("parallelism.ep", "model.architecture.moe.num_experts"),
        f"parallelism.ep ({ep}) must divide the {arch.moe.num_experts} experts "
        f"(model.architecture.moe.num_experts)",
    )


def ep_folds(ep: int, expert_tp: int, stage_ranks: int, arch: ArchitectureSpec) -> Problem | None:
    """Megatron-Core regroups a pipeline stage's TP × CP × DP ranks as expert TP × EP ×
    expert DP (``parallel_state.py`` ``initialize_model_parallel`` raises unless the world
    divides by expert TP × EP × PP): EP × expert TP must divide TP × CP × DP."""
    if arch.moe is None or stage_ranks % (ep * expert_tp) == 0:
        return None
    return Problem(
        (
            "parallelism.ep",
            "parallelism.expert_tp",
            "parallelism.tp",
            "parallelism.cp",
            "parallelism.dp",
        ),
        f"parallelism.ep × parallelism.expert_tp = {ep} × {expert_tp} = {ep * expert_tp} must "
        f"divide the {stage_ranks} ranks of a pipeline stage (parallelism.tp × parallelism.cp "
        f"× parallelism.dp): expert parallelism folds over those ranks",
    )


def global_batch_reachable(global_batch: int, micro_batch: int, replicas: int) -> Problem | None:
    """Every replica takes whole micro-batches: the global batch must be a multiple of
    micro-batch × replicas (DP)."""
    per_step = micro_batch * replicas
    if global_batch % per_step == 0:
        return None
    return Problem(
        ("batch.global_batch", "batch.micro_batch", "parallelism.dp"),
        f"the global batch {global_batch} (batch.global_batch) is not a multiple of "
        f"batch.micro_batch × data-parallel replicas (parallelism.dp) = "
        f"{micro_batch} × {replicas} = {per_step}",
    )


def global_batch_matches(
    global_batch: int, micro_batch: int, grad_accum: int, replicas: int
) -> Problem | None:
    per_step = micro_batch * grad_accum * replicas
    if global_batch == per_step:
        return None
    return Problem(
        ("batch.global_batch", "batch.grad_accum"),
        f"batch.global_batch ({global_batch}) ≠ batch.micro_batch × batch.grad_accum × "
        f"data-parallel replicas = {micro_batch} × {grad_accum} × {replicas} = {per_step}: "
        f"set batch.grad_accum to {global_batch // (micro_batch * replicas)} or clear "
        f"batch.global_batch",
    )


# --- The groups, one per dimension ---------------------------------------------------


def _found(*checked: Problem | None) -> list[Problem]:
    return [p for p in checked if p is not None]


def tp_problems(tp: int, arch: ArchitectureSpec) -> list[Problem]:
    """Heads first: when TP splits no whole heads, the KV rule adds nothing to act on."""
    heads = tp_divides_heads(tp, arch.heads)
    return [heads] if heads else _found(tp_fits_kv_heads(tp, arch.kv_heads))


def pp_problems(
    pp: int, layers: int, virtual_stages: int, split: Split, schedule: str
) -> list[Problem]:
    """The pipeline-split rules of ``pp`` stages (load-time and estimate-time alike)."""
    return _found(
        split_length(split, pp),
        split_non_negative(split),
        virtual_needs_interleaving(virtual_stages, schedule),
        split_sums_to_layers(split, layers),
        pp_within_layers(pp, layers),
        virtual_chunks_even(layers, pp, virtual_stages, split),
    )


def cp_problems(cp: int, seq_len: int) -> list[Problem]:
    return _found(cp_divides_sequence(cp, seq_len))


def ep_problems(ep: int, arch: ArchitectureSpec) -> list[Problem]:
    return _found(ep_needs_experts(ep, arch), ep_divides_experts(ep, arch))


def fold_problems(
    ep: int, expert_tp: int, stage_ranks: int, arch: ArchitectureSpec
) -> list[Problem]:
    """The one rule that couples dimensions: EP × expert TP folds over TP × CP × DP."""
    return _found(ep_folds(ep, expert_tp, stage_ranks, arch))


def dp_problems(dp: int, shard_group_size: int | None) -> list[Problem]:
    return _found(shard_group_divides_dp(shard_group_size, dp))


def batch_problems(
    global_batch: int | None, micro_batch: int, grad_accum: int, replicas: int
) -> list[Problem]:
    """An explicit global batch must be reachable, then match the accumulation."""
    if global_batch is None:
        return []
    reach = global_batch_reachable(global_batch, micro_batch, replicas)
    if reach:
        return [reach]
    return _found(global_batch_matches(global_batch, micro_batch, grad_accum, replicas))


# --- Values each dimension can take (what the layout search enumerates) --------------


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


def tp_values(arch: ArchitectureSpec) -> list[int]:
    """Every TP that can pass :func:`tp_problems`: the divisors of the heads."""
    return divisors(arch.heads)


def pp_values(layers: int) -> range:
    """Every PP that can pass :func:`pp_within_layers`: 1 … layers."""
    return range(1, layers + 1)


def cp_values(seq_len: int) -> list[int]:
    """Every CP that can pass :func:`cp_problems`: the divisors of the sequence."""
    return divisors(seq_len)


def ep_values(arch: ArchitectureSpec) -> list[int]:
    """Every EP that can pass :func:`ep_problems`: the divisors of the experts (1 if dense)."""
    return divisors(arch.moe.num_experts) if arch.moe else [1]


def dp_values(
    max_dp: int,
    shard_group_size: int | None,
    held_batch: int | None,
    micro_batch: int,
    step: int = 1,
) -> Sequence[int]:
    """Every DP ≤ ``max_dp``, ascending, that passes :func:`dp_problems`, is a multiple
    of ``step`` (what :func:`ep_folds` needs of DP for a given TP × CP and EP) and, when a
    global batch is held, passes :func:`global_batch_reachable` with DP replicas.

    Enumerated from the rules' structure (multiples of the shard group and the step; DP
    dividing held ÷ micro) rather than by testing each value: the search asks this once
    per model-parallel shape, and the shapes number in the hundreds.
    """
    if max_dp < 1:
        return range(0)
    sg = lcm(shard_group_size or 1, step)
    if held_batch is None:
        return range(sg, max_dp + 1, sg)
    if held_batch % micro_batch:
        return range(0)
    return [d for d in divisors(held_batch // micro_batch) if d <= max_dp and d % sg == 0]


def fold_step(ep: int, expert_tp: int, tp: int, cp: int, arch: ArchitectureSpec) -> int:
    """The smallest DP step that keeps :func:`ep_folds` true: DP must be a multiple of
    (EP × expert TP) ÷ gcd(EP × expert TP, TP × CP)."""
    if arch.moe is None:
        return 1
    need = ep * expert_tp
    return need // gcd(need, tp * cp)
