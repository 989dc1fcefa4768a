"""Parallel placement: which slice of which tensor a rank of a pipeline stage holds.

Placement happens before data-parallel sharding: TP splits the tensors its plan splits,
PP assigns layers to stages, EP divides routed experts and expert TP splits each of them
(folded over the stage's TP × CP × DP ranks, as Megatron-Core does). CP holds no state
of its own.
The result is the *local* tensor a rank owns, which the sharding strategy then divides
by the size of the group that really shards it.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from functools import lru_cache
from math import prod

from engine.ledger.memo import Memo
from engine.models.inventory import Tensor, layer_tensors, root_tensors
from engine.models.layouts import layer_kind
from engine.models.roles import is_expert_parallel, tp_split_dim
from engine.models.spec import ArchitectureSpec
from engine.sections.parallel import ParallelismSection
from engine.units import ceil_div

KV_ROLES = frozenset({"k", "v"})


@dataclass(frozen=True, slots=True)
class LocalTensor:
    """The part of a tensor one rank holds after TP / EP placement.

    ``count`` > 1 means this tensor stands for that many identical decoder layers' copies
    (see :func:`layer_classes`): every sum over tensors multiplies by it.
    """

    tensor: Tensor
    shape: tuple[int, ...]
    expert: bool  # routed expert: divided by EP and sharded over the expert DP group
    count: int = 1
    numel: int = field(init=False, repr=False, compare=False)  # prod(shape), worked out once

    def __post_init__(self) -> None:
        object.__setattr__(self, "numel", prod(self.shape))


def even_split(layers: int, pp: int) -> tuple[int, ...]:
    """Equal stages, any remainder to the earliest: Megatron's default split (which
    asserts that PP divides the layers, ``transformer_block.py``
    ``get_num_layers_to_build``) extended to any PP."""
    base, extra = divmod(layers, pp)
    return tuple(base + (1 if s < extra else 0) for s in range(pp))


def weighted_split(layers: int, pp: int) -> tuple[int, ...]:
    """The embedding and the output layer + loss each count as one layer: L + 2 units
    over ``pp`` stages, the remainder to the earliest, and the first and last stages
    give one unit to the embedding and the output. torchtitan's default
    (``distributed/pipeline_parallel.py`` ``_generate_llm_fqn_per_model_part`` with
    ``pipeline_parallel_first/last_stage_less_layers = 1``); Megatron's
    ``--account-for-embedding-in-pipeline-split`` and ``--account-for-loss-in-pipeline-
    split`` do the same when PP divides L + 2. DeepSeek-V3's 61 layers on 16 stages:
    63 units → 4 × 15 + 3 → 3, 4 × 14, 2."""
    if pp == 1:
        return (layers,)
    counts = list(even_split(layers + 2, pp))
    counts[0] -= 1
    counts[-1] -= 1
    return tuple(counts)


def policy_split(layers: int, pp: int, policy: str) -> tuple[int, ...]:
    """Layers per stage under ``parallelism.pp_split_policy`` (no explicit split)."""
    if policy == "even" or (policy == "auto" and layers % pp == 0):
        return even_split(layers, pp)
    return weighted_split(layers, pp)


def stage_split(arch: ArchitectureSpec, par: ParallelismSection) -> tuple[int, ...]:
    """Decoder layers of each pipeline stage: the explicit split or Megatron layout if
    given (:attr:`ParallelismSection.layer_split`), else the split policy's."""
    return par.layer_split or policy_split(arch.layers, par.pp, par.pp_split_policy)


@lru_cache(maxsize=1024)
def layout_memo(arch: ArchitectureSpec, par: ParallelismSection) -> Memo:
    """The :class:`~engine.ledger.memo.Memo` of one architecture under one parallelism
    (its ranges and placements here, its states in :mod:`engine.ledger.states.persistent`)."""
    return Memo()


def stage_layer_ranges(arch: ArchitectureSpec, par: ParallelismSection) -> tuple[range, ...]:
    """Decoder layers held by each pipeline stage, as index ranges (see
    :func:`stage_split`); kept in the layout's memo, every stage's rows ask for it."""
    return layout_memo(arch, par).get("ranges", _ranges, arch, par)


def _ranges(arch: ArchitectureSpec, par: ParallelismSection) -> tuple[range, ...]:
    ranges, start = [], 0
    for n in stage_split(arch, par):
        ranges.append(range(start, start + n))
        start += n
    return tuple(ranges)


EMBEDDING_ROLES = frozenset({"embedding", "mtp_embedding"})
HEAD_ROLES = frozenset({"lm_head", "mtp_head"})


def tp_keeps_whole(t: Tensor, style: str) -> bool:
    """Whether ``parallelism.tp_style`` leaves this vocabulary tensor unsplit: the
    embedding unless vocab_parallel (transformers' tp_plan has no entry for
    ``embed_tokens``), the output layer only when replicated (a DTensor plan on the
    decoder layers alone)."""
    if style == "vocab_parallel":
        return False
    return t.role in EMBEDDING_ROLES or (style == "replicated" and t.role in HEAD_ROLES)


def _tp_shape(t: Tensor, arch: ArchitectureSpec, tp: int, style: str) -> tuple[int, ...]:
    """The local shape under TP (roles table: column, row, vocab-parallel or replicated;
    the TP style for the embedding and output layer).

    KV heads that TP cannot split (kv_heads < tp) are replicated: each rank keeps
    ceil(kv_heads / tp) heads, as Megatron and vLLM-style layouts do.
    """
    dim = tp_split_dim(t)
    if tp == 1 or dim is None or tp_keeps_whole(t, style):
        return t.shape
    shape = list(t.shape)
    if t.role in KV_ROLES:
        shape[0] = ceil_div(arch.kv_heads, tp) * (t.shape[0] // arch.kv_heads)
    else:
        shape[dim] = ceil_div(shape[dim], tp)
    return tuple(shape)


@dataclass(frozen=True, slots=True)
class LayerClass:
    """Decoder layers with identical tensors: one representative layer and their indices."""

    tensors: tuple[Tensor, ...]
    layers: tuple[int, ...]


def within_layer(name: str, layer: int) -> str:
    """A layer tensor's name after its layer index — ``model.layers.3.mlp.up_proj.weight``
    → ``mlp.up_proj.weight``, and likewise Falcon's and GPT-2's ``transformer.h.3.…`` /
    ``h.3.…`` — so that layers of one shape fold into one class whatever the family
    calls its layer list (the first path segment equal to the index is the layer's)."""
    parts = name.split(".")
    index = str(layer)
    for i, part in enumerate(parts):
        if part == index:
            return ".".join(parts[i + 1 :])
    return name


def layer_classes(arch: ArchitectureSpec) -> tuple[tuple[Tensor, ...], tuple[LayerClass, ...]]:
    """:func:`_layer_classes`, kept in the memo of the architecture at the default
    parallelism (they read no parallelism)."""
    return layout_memo(arch, _DEFAULT_PAR).get("layer_classes", _layer_classes, arch)


def _layer_classes(arch: ArchitectureSpec) -> tuple[tuple[Tensor, ...], tuple[LayerClass, ...]]:
    """The model's non-layer tensors, and its decoder layers folded into classes.

    A 126-layer model holds 126 copies of the same nine tensors; the ledger's arithmetic
    is per tensor, so folding them keeps every number exact (sums multiply by the count)
    while making the work per estimate independent of depth. Layers stay apart when their
    tensors' names within the layer, shapes, roles or expert indices differ (MoE models'
    dense layers). Only the first layer of each :func:`layer_kind` is built (what a
    layer's tensors read of its index): DeepSeek-V3's 58 MoE layers of 768 expert
    matrices each are one layer built, not 44,544 tensors
    (``tests/engine/ledger/test_layer_classes.py`` compares with folding the whole
    inventory).
    """
    classes: dict[tuple[object, ...], tuple[tuple[Tensor, ...], list[int]]] = {}
    of_kind: dict[bool | None, list[int]] = {}
    for layer in range(arch.layers):
        kind = layer_kind(arch, layer)
        layers = of_kind.get(kind)
        if layers is None:
            ts = layer_tensors(arch, layer)
            signature = tuple(
                (within_layer(t.name, layer), t.shape, t.role, t.kind, t.expert) for t in ts
            )
            layers = of_kind[kind] = classes.setdefault(signature, (ts, []))[1]
        layers.append(layer)
    return root_tensors(arch), tuple(LayerClass(ts, tuple(ls)) for ts, ls in classes.values())


def place_tensor(
    t: Tensor, arch: ArchitectureSpec, par: ParallelismSection, count: int
) -> LocalTensor | None:
    """``t`` as the first EP / TP rank holds it, standing for ``count`` copies; None when
    that rank holds none of it (an expert outside rank 0's EP slice)."""
    expert = is_expert_parallel(t)
    if expert and par.ep > 1 and t.expert is not None:
        n_experts = arch.moe.num_experts if arch.moe else 1
        if t.expert >= ceil_div(n_experts, par.ep):
            return None  # rank 0 of the EP group holds experts [0, E/ep)
    tp = par.expert_tp if expert else par.tp
    shape = _tp_shape(t, arch, tp, par.tp_style)
    if t.stacked and par.ep > 1:
        # Stacked experts: EP keeps rank 0's experts [0, E/ep) of the expert dim, as
        # torchtitan's ExpertParallel (Shard(0) on the EP mesh) and transformers'
        # GroupedGemmParallel slice it.
        shape = (ceil_div(shape[0], par.ep), *shape[1:])
    return LocalTensor(t, shape, expert, count)


def place_stage(
    arch: ArchitectureSpec, par: ParallelismSection, stage: int
) -> tuple[LocalTensor, ...]:
    """The local tensors one rank of ``stage`` holds (first EP / TP rank, the heaviest).

    Identical decoder layers come folded: one representative tensor per class, with
    ``count`` = how many of the stage's layers it stands for. Each tensor's placement is
    the stage's layer classes' (:func:`_class_parts`, worked out once per TP / EP
    placement): a stage of a new pipeline split only counts its layers in each class.
    """
    layers = stage_layer_ranges(arch, par)[stage]
    first, last = stage == 0, stage == par.pp - 1
    tp = _tp_placing(par)
    root_parts, class_parts = layout_memo(arch, tp).get("parts", _class_parts, arch, tp)
    out: list[LocalTensor] = []
    for t, placed in root_parts:
        if t.role in ("embedding", "position_embedding"):
            # Tied embeddings: the last stage keeps its own copy for the output layer.
            if not (first or (last and arch.tied_embeddings and t.role == "embedding")):
                continue
        elif not last:  # final norm, lm_head, MTP modules
            continue
        if placed is not None:
            out.append(placed)
    for cls, parts in zip(layer_classes(arch)[1], class_parts, strict=True):
        count = count_in(cls.layers, layers)
        if count:
            for one, kept in parts:
                n = count * kept
                out.append(one if n == 1 else LocalTensor(one.tensor, one.shape, one.expert, n))
    return tuple(out)


def count_in(indices: tuple[int, ...], layers: range) -> int:
    """How many of ``indices`` fall in ``layers``: a stage's layer count in each class is
    worked out for every stage of every pipeline split, so a stage's range (consecutive
    layers) is counted by two bisections of the indices sorted, not one test per index
    (``tests/engine/ledger/test_placement_composed.py`` compares the two)."""
    if layers.step != 1:
        return sum(map(layers.__contains__, indices))
    got = _SORTED.get(id(indices))
    if got is None or got[0] is not indices:
        if len(_SORTED) >= 1024:
            _SORTED.clear()
        got = _SORTED[id(indices)] = (indices, sorted(indices))
    ordered = got[1]
    return max(0, bisect_left(ordered, layers.stop) - bisect_left(ordered, layers.start))


_SORTED: dict[int, tuple[tuple[int, ...], list[int]]] = {}
"""Each class's layer indices sorted, by the indices tuple's identity (the classes are
cached; the entry holds the tuple, so its id is not reused)."""


_TP_READ = ("tp", "ep", "expert_tp", "tp_style")
"""The parallelism's fields :func:`place_tensor` reads (and :func:`experts_folded` its EP)."""

_TP_PLACINGS: dict[tuple[object, ...], ParallelismSection] = {}
"""One :func:`_tp_placing` parallelism per value of :data:`_TP_READ`."""


def _tp_placing(par: ParallelismSection) -> ParallelismSection:
    """The default parallelism with ``par``'s :data:`_TP_READ` fields: what a tensor's
    placement reads. Built with every other field at its default, not merely keyed on
    these, so a placement that read another field would be wrong at once, in every
    golden plan where that field is set. One object per value (looked up by the values),
    so the class parts' cache hits by identity."""
    d = par.__dict__
    key = tuple([d[f] for f in _TP_READ])
    got = _TP_PLACINGS.get(key)
    if got is None:
        got = _DEFAULT_PAR.model_copy(update=dict(zip(_TP_READ, key, strict=True)))
        if len(_TP_PLACINGS) >= 1024:
            _TP_PLACINGS.clear()
        _TP_PLACINGS[key] = got
    return got


_DEFAULT_PAR = ParallelismSection()

ClassParts = tuple[
    tuple[tuple[Tensor, LocalTensor | None], ...],
    tuple[tuple[tuple[LocalTensor, int], ...], ...],
]
"""(each non-layer tensor and its placement, None when the rank holds none; each layer
class's placed tensors at one copy and how many of rank 0's experts each stands for)."""


def _class_parts(arch: ArchitectureSpec, par: ParallelismSection) -> ClassParts:
    """Every tensor of the model placed once under ``par`` (a :func:`_tp_placing`
    parallelism): the non-layer tensors, and each layer class's tensors with its
    identical routed experts folded (:func:`experts_folded`), at one copy each."""
    root, classes = layer_classes(arch)
    n_experts = arch.moe.num_experts if arch.moe else 1
    parts = []
    for cls in classes:
        placed = []
        for t, kept in experts_folded(cls.tensors, n_experts, par.ep):
            one = place_tensor(t, arch, par, 1)
            if one is not None:
                placed.append((one, kept))
        parts.append(tuple(placed))
    return tuple((t, place_tensor(t, arch, par, 1)) for t in root), tuple(parts)


def experts_folded(
    tensors: tuple[Tensor, ...], n_experts: int, ep: int
) -> tuple[tuple[Tensor, int], ...]:
    """A layer's tensors with its identical routed experts folded like identical layers:
    one representative (the lowest expert index) per expert tensor kind, and how many
    experts of rank 0's EP slice [0, E/ep) it stands for. DeepSeek-V3's 256 experts × 3
    matrices become 3 tensors; every sum multiplies by the count, so bytes and
    allocation counts stay exact. Not kept: its one caller's result is
    (:func:`_class_parts`, in the layout's memo), once per placement of the architecture."""
    local = ceil_div(n_experts, ep) if ep > 1 else n_experts
    out: list[tuple[Tensor, int]] = []
    kinds: dict[tuple[object, ...], int] = {}
    for t in tensors:
        if t.expert is None or not is_expert_parallel(t):
            out.append((t, 1))
            continue
        key = (t.name.replace(f"experts.{t.expert}.", "experts.*.", 1), t.shape, t.role, t.kind)
        if key in kinds:
            if t.expert < local:
                i = kinds[key]
                rep, n = out[i]
                out[i] = (rep if rep.expert is not None and rep.expert < local else t, n + 1)
            continue
        kinds[key] = len(out)
        out.append((t, 1 if t.expert < local else 0))
    return tuple((t, n) for t, n in out if n)


def stage_signature(
    layers: range, classes: tuple[LayerClass, ...], stage: int, pp: int
) -> tuple[bool, bool, tuple[int, ...]]:
    """Everything :func:`place_stage` reads of a stage: whether it is the first or the
    last, and how many of its ``layers`` fall in each layer class."""
    counts = tuple([count_in(cls.layers, layers) for cls in classes])
    return stage == 0, stage == pp - 1, counts


def representative_stages(arch: ArchitectureSpec, par: ParallelismSection) -> tuple[int, ...]:
    """For each stage, the first stage that places exactly the same tensors (same
    signature): DeepSeek-V3 on 16 stages has 3 kinds (first, 14 identical middle
    stages, last), so the persistent rows are computed 3 times, not 16."""
    return layout_memo(arch, par).get("representatives", _representatives, arch, par)


def _representatives(arch: ArchitectureSpec, par: ParallelismSection) -> tuple[int, ...]:
    first: dict[tuple[bool, bool, tuple[int, ...]], int] = {}
    _, classes = layer_classes(arch)
    ranges = stage_layer_ranges(arch, par)
    return tuple(
        first.setdefault(stage_signature(ranges[s], classes, s, par.pp), s) for s in range(par.pp)
    )


def dense_dp_group(par: ParallelismSection) -> int:
    """Ranks holding replicas of the same dense tensor slice: DP × CP.

    CP ranks see different tokens but the same weights, so they join the dense
    data-parallel group (Megatron's data-parallel-with-context group,
    ``parallel_state.get_data_parallel_group(with_context_parallel=True)``; torchtitan's
    dp_shard × cp). EP no longer appears: it folds over these same ranks.
    """
    return par.dp * par.cp


def expert_dp_group(par: ParallelismSection) -> int:
    """Ranks holding replicas of the same routed-expert slice: Megatron-Core's expert data
    parallelism, TP × CP × DP ÷ (EP × expert TP) (``parallel_state.py``
    ``initialize_model_parallel``: ``expert_data_parallel_size = world_size //
    (expert_tensor_parallel_size × expert_model_parallel_size × pipeline_model_parallel_size)``;
    ``theoretical_memory_usage.py`` shards the experts' optimizer over it)."""
    return par.expert_dp
