"""One pipeline stage's decoder layers as the activation rows count them.

A stage's layers come in at most a few kinds — dense or MoE (Qwen-MoE's
``decoder_sparse_step``, Llama-4's interleaving, DeepSeek's dense first layers), the
first layer after a frozen embedding (its input needs no gradient), and the layers a
recompute policy checkpoints — so each kind's saved set is counted once and multiplied
by how many layers have it. Which layers transformers checkpoints under ``every_k``:
those whose index is a multiple of k (``modeling_utils._activation_checkpointing_enable``:
``layer_index % every_n_layers == 0``); the megatron profile keeps its L // k blocks;
torchtitan's layer SAC those with ``(layer_index + 1) % k == 0``, and its per-op SAC
(``selective``) counts every layer as checkpointed, keeping the cached op outputs
(:mod:`~engine.ledger.activations.torchtitan`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache, partial
from typing import NamedTuple

from engine.ledger.activations import hf
from engine.ledger.activations import megatron as mg
from engine.ledger.activations import titan_moe as tm
from engine.ledger.activations import torchtitan as tt
from engine.ledger.activations.geometry import (
    Geometry,
    Term,
    Trainability,
    at_shape,
    geometry,
    shape_free_geometry,
    terms_at,
    trainability,
)
from engine.ledger.activations.geometry import terms_formula as formula
from engine.ledger.activations.hf_layer import HfLayer
from engine.ledger.activations.recompute_modules import core_attn, drop_recomputed, terms_key
from engine.ledger.activations.sdpa_kernel import attention_key
from engine.ledger.placement import stage_layer_ranges
from engine.ledger.shape_free import shape_free
from engine.models.spec import ArchitectureSpec, MoESpec
from engine.plan import Plan
from engine.sections.method import RecomputeSection
from engine.units import fmt_count


class LayerKind(NamedTuple):
    """Layers with one saved set: their terms and how many of the stage's are saved."""

    name: str
    terms: tuple[Term, ...]
    bytes: int
    saved: int  # layers of this kind that keep their whole saved set
    moe: bool = False  # a routed-experts layer (its backward runs the combine's grads)


class StageLayers(NamedTuple):
    """The stage's layers: each kind's saved set, the checkpointed ones, the largest (a
    named tuple: every fresh estimate builds them per make-up)."""

    kinds: tuple[LayerKind, ...]
    n_layers: int
    n_ckpt: int
    ckpt: tuple[Term, ...]
    ckpt_bytes: int
    largest: int  # the largest layer's saved set (recomputed in backward)
    ends: Ends = (False, False, False)  # its last, second-last, first layer checkpointed
    one: int = 0  # one_bytes, worked out once where the layers are counted (counted_at)

    @property
    def n_plain(self) -> int:
        return self.n_layers - self.n_ckpt

    @property
    def plain_bytes(self) -> int:
        return sum([k.bytes * k.saved for k in self.kinds])

    @property
    def one_bytes(self) -> int:
        """One micro-batch's saved layers: the plain ones and the checkpoint inputs."""
        return self.one

    def describe(self, g: Geometry) -> str:
        shown = [k for k in self.kinds if k.saved] or list(self.kinds[:1])
        parts = [
            f"per {k.name} layer {formula(list(k.terms), g)} = {fmt_count(k.bytes)} B"
            for k in shown
        ]
        counts = " + ".join(f"{k.saved} × {fmt_count(k.bytes)}" for k in self.kinds if k.saved)
        out = (
            "; ".join(parts) + f"; {self.n_plain} layers saved" + (f" ({counts})" if counts else "")
        )
        if self.n_ckpt:
            out += (
                f" + {self.n_ckpt} checkpointed × {fmt_count(self.ckpt_bytes)} B "
                f"({formula(list(self.ckpt), g)})"
            )
        return out


_new_kind = partial(tuple.__new__, LayerKind)
_new_layers = partial(tuple.__new__, StageLayers)
"""Named tuples built in C from a tuple of all their fields."""


def context(plan: Plan, g: Geometry, tr: Trainability) -> HfLayer:
    """The hf profile's view of the plan (parameters are fp32 under fp32 or autocast)."""
    return layer_context(
        g, tr, plan.model.architecture, attention_key(plan), plan.method.recompute.policy
    )


def layer_context(
    g: Geometry, tr: Trainability, arch: ArchitectureSpec, attention: str, policy: str
) -> HfLayer:
    """:func:`context` from exactly what it reads, so the cached :func:`_kind_terms` can
    build it without the plan."""
    return HfLayer(
        g, tr, arch, attention, policy == "selective", g.autocast or g.compute_bytes == 4
    )


def _checkpointed(rec: RecomputeSection, profile: str, index: int, position: int, n: int) -> bool:
    if rec.policy == "full" or (rec.policy == "selective" and profile == "torchtitan"):
        return True
    if rec.policy != "every_k":
        return False
    if profile == "megatron":
        return position < n // rec.every_k
    if profile == "torchtitan":  # ptd_checkpoint_wrapper._count starts at 1
        return (index + 1) % rec.every_k == 0
    return index % rec.every_k == 0


Saved = tuple[tuple[tuple[bool, bool], int], ...]
"""A stage's layer kinds ((is_moe, input needs a gradient), how many keep their saved
set), in order of first appearance."""


Ends = tuple[bool, bool, bool]
"""Whether the stage's last, second-last and first layers — whose backward runs at
``backward.layers`` / ``middle`` / ``end`` — are checkpointed (``every_k``: some are)."""
Walk = tuple[Saved, int, int, Ends]
"""What a stage's layers are to its activation rows: its kinds (:data:`Saved`), its
checkpointed layers, its layers and its :data:`Ends` (:func:`layer_walk`)."""


def stage_layers(plan: Plan, stage: int) -> StageLayers:
    """Count the stage's layers by kind (see the module docstring).

    The walk over the stage's layers (:func:`layer_walk`) only says which kinds occur
    (in order of first appearance), how many of each keep their saved set, and how many
    are checkpointed; the kinds' terms, bytes and description are built by
    :func:`counted_layers`. Both are cached on the plan (one slot read), and the work
    under them (:func:`_walk`, :func:`_kind_terms`, :func:`layer_kind_terms`) on exactly the
    inputs it reads — never the whole plan — so pipeline stages of the same make-up, and
    layouts that differ only where a layer's saved set does not look (DP, EP, PP, the
    strategy), share it."""
    return counted_layers(plan, layer_walk(plan, stage))


def layer_walk(plan: Plan, stage: int) -> Walk:
    """The :data:`Walk` of the stage's layers: all a stage's :class:`StageLayers` reads
    of the stage. Cached on the plan too (a plan's hash is one slot read; the walk's
    inputs hash field by field), as is :func:`counted_layers`. Only this stage's walk
    is worked out (the layout search's floors ask for a few stages of each layout)."""
    moe, rec, profile, frozen = _walk_reads(plan)
    layers = stage_layer_ranges(plan.model.architecture, plan.parallelism)[stage]
    return _walk(moe, rec, profile, layers, frozen and stage == 0)


def layer_walks(plan: Plan) -> tuple[Walk, ...]:
    """Every stage's :func:`layer_walk`, the plan's sections read once for all stages
    (what an estimate of every stage asks)."""
    moe, rec, profile, frozen = _walk_reads(plan)
    return tuple(
        _walk(moe, rec, profile, layers, frozen and s == 0)
        for s, layers in enumerate(stage_layer_ranges(plan.model.architecture, plan.parallelism))
    )


def _walk_reads(plan: Plan) -> tuple[MoESpec | None, RecomputeSection, str, bool]:
    """What :func:`_walk` reads of the plan besides the stage: the MoE layers (none
    under the megatron profile), the recompute policy, the profile, and whether the
    embedding is frozen (the first stage's first layer's input then needs no
    gradient)."""
    profile = plan.runtime.activation_profile
    moe = plan.model.architecture.moe if profile != "megatron" else None
    return moe, plan.method.recompute, profile, not trainability(plan).embedding


@lru_cache(maxsize=1024)
def counted_layers(plan: Plan, walk: Walk) -> StageLayers:
    """The :class:`StageLayers` of a stage whose layers walk as ``walk``: its kinds'
    terms from :func:`_kind_terms` (shared across micro-batch sizes), their bytes at the
    plan's own geometry."""
    g = geometry(plan)
    return counted_at(plan, walk, g.seq)(g)


def counted_at(plan: Plan, walk: Walk, seq: int) -> Callable[[Geometry], StageLayers]:
    """:func:`counted_layers` at the geometry of a micro-batch of ``seq`` local tokens a
    sequence: the kinds' terms and their bytes as functions of the micro-batch's size
    (:func:`~engine.ledger.activations.geometry.terms_at`) looked up here, once
    (:func:`_kind_terms`), only those bytes worked out there."""
    saved, n_ckpt, n_layers, ends = walk
    free = shape_free(plan)
    rt = free.runtime
    kinds, ckpt, ckpt_bytes = _kind_terms(
        free.model.architecture,
        at_shape(shape_free_geometry(free), 1, seq),
        trainability(free),
        rt.activation_profile,
        attention_key(plan),  # the plan's own sequence: whether samples are padded
        terms_key(free.method.recompute, rt.activation_profile == "megatron"),
        tuple([k for k, _ in saved]),
    )
    named = [(*kind, n) for kind, (_, n) in zip(kinds, saved, strict=True)]

    def at(g: Geometry) -> StageLayers:
        b = g.micro_batch
        counted = tuple(
            [_new_kind((name, terms, size(b), n, is_moe)) for name, terms, size, is_moe, n in named]
        )
        ck = ckpt_bytes(b)
        one = sum([k.bytes * k.saved for k in counted]) + n_ckpt * ck  # one_bytes
        return _new_layers(
            (counted, n_layers, n_ckpt, ckpt, ck, max([k.bytes for k in counted]), ends, one)
        )

    return at


_Kinds = tuple[tuple[str, tuple[Term, ...], Callable[[int], int], bool], ...]
"""Each layer kind's (name, saved terms, their bytes by micro-batch size, is MoE)."""


@lru_cache(maxsize=1024)
def _kind_terms(
    arch: ArchitectureSpec,
    g: Geometry,
    tr: Trainability,
    profile: str,
    attention: str,
    policy: str,
    kinds: tuple[tuple[bool, bool], ...],
) -> tuple[_Kinds, tuple[Term, ...], Callable[[int], int]]:
    """Each layer kind's terms (:func:`layer_kind_terms`) and bytes, and the checkpointed
    layers' input terms and bytes, at ``g`` — one sequence of the local length (terms
    are widths per token, so plans differing only in the micro-batch share them) —
    built from exactly what they read: layouts that differ only where a layer's saved
    set does not look (DP, EP, PP and its split, the strategy) share them, and so do
    stages with the same kinds in other counts (a stage is its kinds' counts)."""
    out = tuple(
        [
            (name, terms, terms_at(terms, g).bytes, is_moe)
            for name, terms, is_moe in layer_kind_terms(
                arch, g, tr, profile, attention, policy, kinds
            )
        ]
    )
    flex = attention == "flex"
    moe_sac = tm.checkpoint_terms(g, arch, arch.fused_qkv, flex)  # torchtitan, all MoE
    if profile == "torchtitan" and policy == "selective" and moe_sac is not None:
        ckpt = tuple(moe_sac)
    else:
        ckpt = tuple(_checkpoint_terms(profile, policy, g, arch.fused_qkv, flex))
    return out, ckpt, terms_at(ckpt, g).bytes


def _checkpoint_terms(
    profile: str, policy: str, g: Geometry, fused_qkv: bool, flex: bool
) -> list[Term]:
    """What a checkpointed layer keeps: its input, or — torchtitan's per-op SAC — its
    input and the cached op outputs."""
    if profile == "megatron":
        return mg.checkpoint_input_terms(g)
    if profile == "torchtitan":
        if policy == "selective":
            return tt.op_sac_terms(g, fused_qkv, flex)
        return tt.checkpoint_input_terms(g)
    return hf.checkpoint_input_terms(g)


@lru_cache(maxsize=1024)
def _walk(
    moe: MoESpec | None,
    rec: RecomputeSection,
    profile: str,
    layers: range,
    frozen_input: bool,
) -> Walk:
    """The :data:`Walk` of the layers in ``layers`` (``frozen_input``: the first of them
    takes a frozen embedding's output, which needs no gradient)."""
    order: dict[tuple[bool, bool], int] = {}  # kinds in order of first appearance: saved
    n_ckpt, n, ckpt = 0, len(layers), [False] * len(layers)
    for pos, i in enumerate(layers):
        is_moe = moe is not None and moe.is_moe_layer(i)
        if _checkpointed(rec, profile, i, pos, n):
            n_ckpt, ckpt[pos] = n_ckpt + 1, True
            order.setdefault((is_moe, True), 0)
            continue
        key = (is_moe, not (frozen_input and pos == 0))
        order[key] = order.get(key, 0) + 1
    if not order:
        order[(False, True)] = 0
    ends = (ckpt[-1], ckpt[max(0, n - 2)], ckpt[0]) if n else (False, False, False)
    return tuple(order.items()), n_ckpt, n, ends


def layer_kind_terms(
    arch: ArchitectureSpec,
    g: Geometry,
    tr: Trainability,
    profile: str,
    attention: str,
    policy: str,
    kinds: tuple[tuple[bool, bool], ...],
) -> tuple[tuple[str, tuple[Term, ...], bool], ...]:
    """Each layer kind's (name, saved terms, is MoE), for kinds (is_moe, input needs a
    gradient). A term is a width per token: none reads the micro-batch's size, so
    :func:`_kind_terms` asks with ``g`` at one sequence and plans differing only in the
    micro-batch share the terms (``tests/engine/ledger/activations/
    test_terms_per_sequence.py`` checks every profile's terms at other sizes)."""
    # torchtitan's selective is per-op SAC, never the hf profile's attention-core drop
    c = layer_context(g, tr, arch, attention, "none" if profile == "torchtitan" else policy)
    out = []
    for is_moe, ing in kinds:
        if profile == "megatron":
            terms = drop_recomputed(
                _megatron_terms(arch, attention, g, core_attn(policy), tr.dropout), policy
            )
        elif profile == "torchtitan":
            flex = attention == "flex"
            terms = (
                tm.block_terms(g, arch, flex) if is_moe else tt.layer_terms(g, arch.qk_norm, flex)
            )
        else:
            terms = hf.layer_terms(
                c, moe_layer=is_moe, dense_width=hf.dense_width(arch, g.tp), ing=ing
            )
        name = ("MoE" if is_moe else "dense" if arch.moe else "") + (
            "" if ing else " first (frozen embedding)"
        )
        out.append((name.strip() or "decoder", tuple(terms), is_moe))
    return tuple(out)


def final_norm_terms(plan: Plan, g: Geometry) -> tuple[Term, ...]:
    """The last stage's final norm and lm_head input (its saved terms): widths per token
    like the layers' (:func:`layer_kind_terms`), built once per local sequence."""
    return final_norm_at(plan, g.seq)[0]


def final_norm_at(plan: Plan, seq: int) -> tuple[tuple[Term, ...], Callable[[int], int]]:
    """:func:`final_norm_terms` at a local sequence of ``seq``, and their bytes as a
    function of the micro-batch's size (:func:`~engine.ledger.activations.geometry.
    terms_at`), built from exactly what they read (other layouts share them)."""
    free = shape_free(plan)
    rt = free.runtime
    return _final_norm_terms(
        free.model.architecture,
        at_shape(shape_free_geometry(free), 1, seq),
        trainability(free),
        rt.activation_profile,
        attention_key(plan),  # the plan's own sequence: whether samples are padded
        free.method.recompute.policy,
        tt.composite_final_norm(rt.torchtitan_version),
    )


def _final_norm_terms(
    arch: ArchitectureSpec,
    g: Geometry,
    tr: Trainability,
    profile: str,
    attention: str,
    policy: str,
    composite: bool,  # torchtitan's own RMSNorm (before 0.1.0)
) -> tuple[tuple[Term, ...], Callable[[int], int]]:
    if profile == "megatron":
        terms = tuple(mg.final_terms(g))
    elif profile == "torchtitan":
        terms = tuple(tt.final_norm_terms(g, composite))
    else:
        terms = tuple(hf.final_norm_terms(layer_context(g, tr, arch, attention, policy)))
    return terms, terms_at(terms, g).bytes


def _megatron_terms(
    arch: ArchitectureSpec, attention: str, g: Geometry, selective: bool, dropout: bool
) -> list[Term]:
    return mg.layer_terms(
        g,
        mlp="gelu" if arch.mlp == "gelu" else "swiglu",
        attention=attention,
        selective=selective,
        dropout=dropout,
        qk_norm=arch.qk_norm,
    )
